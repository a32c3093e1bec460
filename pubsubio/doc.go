// Package pubsubio is native Google Cloud Pub/Sub I/O for Apache Beam Go
// pipelines that runs on every portable runner (Prism, Dataflow, Flink).
//
// Read returns the messages of one or more subscriptions and acks each one
// only after the runner has committed the bundle that emitted it, so a crash
// or a failed bundle loses nothing: Pub/Sub redelivers (at-least-once).
//
// This package is the facade users import; the read path lives in
// pubsubio/source, the shared values in pubsubio/model, and client
// construction in pubsubio/connection.
package pubsubio
