package pubsubio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
)

// The dead-letter values, re-exported from package dlq, which also holds
// the envelope's attributes and Decode, for consumers of the topic.
type (
	// FailedMessage is one dead letter: a message a failure policy routed,
	// with where it failed and why.
	FailedMessage = dlq.FailedMessage
	// FailureStage says at which step a message failed.
	FailureStage = dlq.FailureStage
	// DeadLetterConfig configures WriteDeadLetters: every option, its
	// default and why.
	DeadLetterConfig = dlq.Config
)

// Failure stages (FailedMessage.Stage).
const (
	// StageDecode: received, but not decodable (the read, the record view).
	StageDecode = dlq.StageDecode
	// StageLate: received behind the watermark the read had already
	// reported (LateDeadLetter).
	StageLate = dlq.StageLate
	// StageValidate: the sink found it breaks Pub/Sub's limits before
	// sending.
	StageValidate = dlq.StageValidate
	// StagePublish: Pub/Sub rejected it when it was published alone.
	StagePublish = dlq.StagePublish
)

// WriteDeadLetters publishes failed, a PCollection<FailedMessage>, to
// cfg.Topic, which must exist, one envelope per dead letter (package dlq
// describes it). A bundle commits only after Pub/Sub confirmed every dead
// letter of it. An invalid configuration panics at graph construction;
// TryWriteDeadLetters returns it.
func WriteDeadLetters(s beam.Scope, cfg DeadLetterConfig, failed beam.PCollection) {
	dlq.Write(s, cfg, failed)
}

// TryWriteDeadLetters is WriteDeadLetters returning the construction error
// instead of panicking.
func TryWriteDeadLetters(s beam.Scope, cfg DeadLetterConfig, failed beam.PCollection) error {
	return dlq.TryWrite(s, cfg, failed)
}

// Originals returns the original message of each dead letter in failed, a
// PCollection<FailedMessage>, as a PCollection<Message>: what a replay
// pipeline writes back once the cause is fixed.
func Originals(s beam.Scope, failed beam.PCollection) beam.PCollection {
	return dlq.Originals(s, failed)
}
