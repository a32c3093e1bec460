package pubsubio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/sink"
)

// The write path's values, re-exported from the leaf packages.
type (
	// WriteConfig configures Write: every option, its default and why.
	WriteConfig = sink.Config
	// PublisherOptions tune the client's publishers (batching, timeout,
	// compression, retry backoff, message ordering).
	PublisherOptions = sink.PublisherOptions
	// TopicCreateOptions configure the topics Write creates.
	TopicCreateOptions = sink.TopicCreateOptions
	// CreateDisposition is CreateIfNeeded or CreateNever.
	CreateDisposition = sink.CreateDisposition
	// FailurePolicy is PolicyFail, PolicyDrop or PolicyDeadLetter.
	FailurePolicy = model.FailurePolicy
)

// Create dispositions (WriteConfig.CreateDisposition).
const (
	// CreateIfNeeded (default) creates a topic a publish found missing.
	CreateIfNeeded = sink.CreateIfNeeded
	// CreateNever fails the bundle on a missing topic.
	CreateNever = sink.CreateNever
)

// Failure policies (WriteConfig.FailurePolicy): what happens to a message
// Pub/Sub will not take.
const (
	// PolicyFail (default) fails the bundle.
	PolicyFail = model.PolicyFail
	// PolicyDrop logs, counts and drops the message.
	PolicyDrop = model.PolicyDrop
	// PolicyDeadLetter emits it on the PCollection Write returns.
	PolicyDeadLetter = model.PolicyDeadLetter
)

// Write publishes msgs, a PCollection<Message>, to cfg.Topic, or to each
// message's own Topic when set (dynamic destinations), and returns the dead
// letters, a PCollection<FailedMessage> that is empty unless
// cfg.FailurePolicy is PolicyDeadLetter. A bundle commits only after Pub/Sub
// confirmed every message it published (at-least-once). An invalid
// configuration panics at graph construction; TryWrite returns it as an
// error.
func Write(s beam.Scope, cfg WriteConfig, msgs beam.PCollection) beam.PCollection {
	return sink.Write(s, cfg, msgs)
}

// TryWrite is Write returning the construction error instead of panicking.
func TryWrite(s beam.Scope, cfg WriteConfig, msgs beam.PCollection) (beam.PCollection, error) {
	return sink.TryWrite(s, cfg, msgs)
}

// MessagesFromBytes turns a PCollection<[]byte> into a PCollection<Message>,
// each element the payload of a message for the default topic.
func MessagesFromBytes(s beam.Scope, col beam.PCollection) beam.PCollection {
	return sink.MessagesFromBytes(s, col)
}

// MessagesFromStrings turns a PCollection<string> into a
// PCollection<Message>, each element the payload of a message for the
// default topic.
func MessagesFromStrings(s beam.Scope, col beam.PCollection) beam.PCollection {
	return sink.MessagesFromStrings(s, col)
}
