package dlq

import (
	"bytes"
	"maps"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// FailureStage says at which step a message failed.
type FailureStage string

// known reports whether s is one of the stages pubsubio writes.
func (s FailureStage) known() bool {
	return s == StageDecode || s == StageLate || s == StageValidate || s == StagePublish
}

const (
	// StageDecode: the message was received but could not be turned into a
	// pipeline value: by the source (e.g. a malformed timestamp attribute)
	// or by the record view (a payload that does not hold the chosen
	// format).
	StageDecode FailureStage = "decode"
	// StageLate: the source received the message behind the watermark it
	// had already reported, so a window downstream may have fired without
	// it (source.LateDeadLetter); Error gives its event time and the
	// watermark.
	StageLate FailureStage = "late"
	// StageValidate: the sink found, before sending, that the message breaks
	// one of Pub/Sub's limits (size, attributes, ordering key, empty
	// message), so Pub/Sub would have rejected it.
	StageValidate FailureStage = "validate"
	// StagePublish: Pub/Sub rejected the message when it was published
	// alone (a confirmed single-message rejection).
	StagePublish FailureStage = "publish"
)

// MaxErrorBytes bounds FailedMessage.Error. A status message from a service
// can be arbitrarily long (it may quote the request), and a dead letter is
// itself published to Pub/Sub, where the error travels as an attribute
// value, which holds at most 1024 bytes; the full error is in the worker's
// log.
const MaxErrorBytes = model.MaxAttributeValueBytes

// FailedMessage is one message a failure policy routed to the dead-letter
// output instead of failing the bundle. It is a plain struct any downstream
// DoFn can read; Beam encodes it with the coder in coder.go.
type FailedMessage struct {
	// Message is the message as it failed: for the sink, what the pipeline
	// gave it (Data, Attributes, OrderingKey, Topic as set); for the source,
	// what was received (with ID and PublishTime).
	Message model.Message
	// Subscription is where a source failure came from; zero for the sink.
	Subscription model.Subscription
	// Topic is where a sink failure was going: the message's own Topic or the
	// sink's default; zero for the source.
	Topic model.Topic
	// Stage is the step that failed. Encode writes only the stages above;
	// it lists any other in dlq.omitted.
	Stage FailureStage
	// Code is the canonical gRPC status code name ("INVALID_ARGUMENT"),
	// "INVALID_ARGUMENT" for a limit the sink checked before sending, and
	// empty for a failure that has no status (a decode failure).
	Code string
	// Error is the failure's text, at most MaxErrorBytes bytes.
	Error string
	// Time is when the failure was observed.
	Time time.Time
	// Attempts is how many times the message was tried: publish attempts
	// for the sink (0 when it was rejected before sending), delivery
	// attempts for the source (0 when Pub/Sub does not report them).
	// Encode lists a negative count in dlq.omitted.
	Attempts int
}

// Original returns the failed message as it was, ready to be processed or
// published again: a source failure's message as the source emitted it
// (with its Subscription), a sink failure's message as the pipeline gave it
// to the sink, with Topic set to where it was going, so that writing it
// back through the sink sends it there even when it had used the sink's
// default topic. Data and Attributes are copies: changing them does not
// change f.
func (f FailedMessage) Original() model.Message {
	m := f.Message
	m.Data = bytes.Clone(m.Data)
	m.Attributes = maps.Clone(m.Attributes)
	if !f.Subscription.IsZero() {
		m.Subscription = f.Subscription
	}
	if !f.Topic.IsZero() {
		m.Topic = f.Topic
	}
	return m
}

// New returns the FailedMessage for msg failing at stage with err. Code is
// taken from err's gRPC status, if it carries one; the caller sets
// Subscription or Topic.
func New(stage FailureStage, msg model.Message, err error, attempts int, at time.Time) FailedMessage {
	f := FailedMessage{Message: msg, Stage: stage, Time: at, Attempts: attempts}
	if err != nil {
		if c, ok := grpccode.Of(err); ok {
			f.Code = grpccode.Name(c)
		}
		f.Error = text.Truncate(err.Error(), MaxErrorBytes)
	}
	return f
}
