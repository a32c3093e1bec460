// Package pubsubio is native Google Cloud Pub/Sub I/O for Apache Beam Go
// pipelines that runs on every portable runner (Prism, Dataflow, Flink).
//
// Read returns the messages of one or more subscriptions, or of topics
// through subscriptions of its own (ReadConfig.Topics), and acks each one
// only after the runner has committed the bundle that emitted it, so a crash
// or a failed bundle loses nothing: Pub/Sub redelivers (at-least-once).
// A message whose payload does not hold the read's Format follows its
// DecodePolicy; ReadWithDeadLetters also returns those it dead-lettered.
//
// Write publishes messages, batched per destination topic, and lets a
// bundle commit only after Pub/Sub confirmed every message it published.
// What Pub/Sub will not take follows its FailurePolicy.
//
// Decode turns messages into Go values (JSON, Avro or Protocol Buffers,
// reading each message with the schema revision Pub/Sub stamped on it),
// and Encode turns values back into messages for Write; package typed
// documents the formats and the schema checks.
//
// Records turns messages into JSON records. Every step that cannot handle a
// message emits it as a FailedMessage; WriteDeadLetters publishes those to
// a dead-letter topic, and Originals turns them back into messages.
//
// Every configuration is checked when the pipeline is built: an invalid one
// panics, or, from the Try variants, returns an error that wraps
// ErrInvalidConfig and names the option and the value.
//
// What a failed bundle means depends on the runner: Prism fails the job,
// Dataflow retries the bundle, Flink restores from its last checkpoint.
// Either way nothing is lost, and a retried bundle may publish again:
// Deduplicate removes what was seen before, keyed by Message.ID or by the
// ID attribute WriteConfig.IDAttribute sets.
//
// Most programs import only this package. Its names stand for those of
// the packages below it (source, sink, dlq, dedup, record, typed, model),
// spelled the same or with the package's concept added where one
// namespace needs it: ReadConfig is source.Config, DedupConfig is
// dedup.Config. Package dlq holds the envelope a dead letter travels in
// on its topic, and Decode for its consumers. Package pubsubio/io/pubsubio
// has the API of Beam's io/pubsubio on top of this one, for pipelines
// written for Beam's.
package pubsubio
