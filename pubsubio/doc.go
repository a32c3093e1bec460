// Package pubsubio is native Google Cloud Pub/Sub I/O for Apache Beam Go
// pipelines that runs on every portable runner (Prism, Dataflow, Flink).
//
// Read returns the messages of one or more subscriptions and acks each one
// only after the runner has committed the bundle that emitted it, so a crash
// or a failed bundle loses nothing: Pub/Sub redelivers (at-least-once).
// A message whose payload does not hold the read's Format follows its
// DecodePolicy; ReadWithDeadLetters also returns those it dead-lettered.
// Write publishes messages, batched per destination topic, and lets a
// bundle commit only after Pub/Sub confirmed every message it published.
//
// This package is the facade users import; the read path lives in
// pubsubio/source, the write path in pubsubio/sink, the dead-letter
// contract and the dead-letter topic writer (dlq.Write) in pubsubio/dlq,
// the record view (Records) in pubsubio/record, the shared values in
// pubsubio/model, and client construction in pubsubio/connection.
package pubsubio
