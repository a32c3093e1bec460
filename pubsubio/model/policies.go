package model

// DecodePolicy says what the read (source.Config) or Decode (typed) does
// with a message that fails to decode: its payload does not hold the
// Format, or its timestamp attribute is malformed. A poison message must
// end somewhere visible; the policies differ in where.
type DecodePolicy string

const (
	// DecodeFail fails the bundle naming the message and why; the message
	// is nacked and redelivered, so the job stops making progress until the
	// publisher is fixed. Nothing is lost.
	DecodeFail DecodePolicy = "FAIL"
	// DecodeDrop acks the message with its bundle and counts it in
	// decode_failures without emitting it: for streams where a bad message
	// is worth less than a stalled job.
	DecodeDrop DecodePolicy = "DROP"
	// DecodeNack nacks the message at once, so that the subscription's own
	// dead-letter policy forwards it after its max delivery attempts. Every
	// subscription must have a dead-letter policy: without one a poison
	// message is redelivered forever, invisibly.
	DecodeNack DecodePolicy = "NACK"
	// DecodeDeadLetter emits the message as a dlq.FailedMessage (stage
	// decode) on the dead-letter output and acks it with its bundle.
	// Only the transforms that return dead letters (ReadWithDeadLetters,
	// Decode) accept it.
	DecodeDeadLetter DecodePolicy = "DEAD_LETTER"
)

// FailurePolicy says what Write (sink.Config) or Encode (typed) does with
// a message Pub/Sub will not take or that cannot be encoded: one
// that breaks Pub/Sub's limits (checked before sending), one Pub/Sub
// rejected when it was published alone, or one to a missing topic under
// CreateNever. Nothing else is routed: an outage
// (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, PERMISSION_DENIED...)
// fails the bundle under every policy, so a service incident never drains
// a stream one dropped message at a time.
type FailurePolicy string

const (
	// PolicyFail (default) fails the bundle: the only policy that never
	// leaves a gap in the output.
	PolicyFail FailurePolicy = "FAIL"
	// PolicyDrop logs each failed message at warning level with its
	// destination and status, counts it, and drops it.
	PolicyDrop FailurePolicy = "DROP"
	// PolicyDeadLetter emits each failed message, as a dlq.FailedMessage, on
	// the dead-letter output the transform returns.
	PolicyDeadLetter FailurePolicy = "DEAD_LETTER"
)
