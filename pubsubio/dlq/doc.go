// Package dlq holds pubsubio's dead letters: the contract shared by the read
// path, the record view and the write path, and a transform that publishes
// them to a dead-letter topic.
//
// FailedMessage is one message a failure policy routed instead of failing
// the bundle: the original message, where it came from or was going, the
// stage that failed, the gRPC code and the (bounded) error text. Every
// producer emits the same type, so one downstream transform serves every
// source and sink of a pipeline. Beam encodes it with a custom coder
// (deterministic bytes, opaque to the runner; see coder.go).
// FailedMessage.Original and Originals recover the original messages, for
// a replay.
//
// Write publishes a PCollection of FailedMessage to a dead-letter topic,
// batched, confirmed before each bundle commits, each wait bounded by
// FlushTimeout; it never creates its topic, and connects with its own
// Connection settings.
//
// # The envelope
//
// A dead letter on the topic is the original payload as data, and
// attributes (the Attr constants; Decode reads them back):
//
//	dlq.envelope          "1", the envelope's version
//	dlq.stage             decode | validate | publish
//	dlq.subscription      projects/P/subscriptions/S a source failure came from
//	dlq.topic             projects/P/topics/T a sink failure was going to
//	dlq.code              gRPC code name, e.g. INVALID_ARGUMENT
//	dlq.error             error text, at most 1,024 bytes
//	dlq.time              failure time, RFC 3339 UTC
//	dlq.attempts          publish attempts (sink) or delivery attempts (source)
//	dlq.message_id        the original's message ID
//	dlq.ordering_key      the original's ordering key
//	dlq.publish_time      the original's publish time, RFC 3339 UTC
//	dlq.delivery_attempt  the original's delivery attempt
//	dlq.attr.<key>        each original attribute <key>
//	dlq.omitted           what did not fit, only when something did not
//
// Empty values are not set. The dead letter itself has no ordering key.
// Nothing makes an envelope fail its batch: what Pub/Sub's limits (100
// attributes, 256-byte keys, 1,024-byte values, 10 MB per publish) do not
// let it carry, such as an original attribute with a 1,000-byte key or a
// payload that was dead-lettered for being too large, is left out and
// listed in dlq.omitted (Encode has the rules).
package dlq
