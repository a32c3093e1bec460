package pubsubio

import (
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source"
)

// The values users pass around, re-exported from the leaf packages.
type (
	// Message is one Pub/Sub message in a pipeline.
	Message = model.Message
	// Subscription names a Pub/Sub subscription.
	Subscription = model.Subscription
	// Topic names a Pub/Sub topic.
	Topic = model.Topic
	// ReadConfig configures Read: every option, its default and why.
	ReadConfig = source.Config
	// Connection says where and as whom to connect: an emulator endpoint or a
	// service-account key file; neither means application-default
	// credentials against Pub/Sub.
	Connection = connection.Settings
	// OrderingMode is OrderingNone or OrderingPerKey.
	OrderingMode = source.OrderingMode
	// FinalizationMode is FinalizationAuto, FinalizationOn or FinalizationOff.
	FinalizationMode = source.FinalizationMode
	// DecodePolicy is DecodeFail, DecodeDrop, DecodeNack or DecodeDeadLetter:
	// what the read does with a message that does not decode.
	DecodePolicy = model.DecodePolicy
	// LatePolicy is LateEmit or LateDeadLetter: what the read does with a
	// message behind the watermark it already reported.
	LatePolicy = source.LatePolicy
	// CommitMode is CommitAuto, CommitResume or CommitFlinkCheckpoint: when
	// the read acks what a bundle emitted.
	CommitMode = source.CommitMode
	// FlinkCheckpoints is where a read on Flink learns of its job's
	// completed checkpoints.
	FlinkCheckpoints = source.FlinkCheckpoints
	// BacklogMode is BacklogAuto or BacklogOff: whether the read samples
	// its subscriptions' backlog from Cloud Monitoring.
	BacklogMode = source.BacklogMode
	// SubscriptionSetup is what the read's prepare step does for one
	// subscription before reading it: create it when missing, seek it to a
	// start position. Most reads need none.
	SubscriptionSetup = source.SubscriptionSetup
	// SubscriptionCreateOptions authorise creating a missing subscription,
	// and say how (Topic required).
	SubscriptionCreateOptions = source.SubscriptionCreateOptions
	// TopicSubscriptionOptions name and configure the subscriptions a
	// read creates for ReadConfig.Topics.
	TopicSubscriptionOptions = source.TopicSubscriptionOptions
	// StartPosition is where the read of a subscription starts; a seek, once
	// per job, shared by every consumer of the subscription.
	StartPosition = source.StartPosition
	// PositionKind is PositionResume, PositionEarliestRetained,
	// PositionLatest, PositionTimestamp or PositionSnapshot.
	PositionKind = source.PositionKind
	// AckLatencySummary describes how long this process's emitted messages
	// waited for their ack.
	AckLatencySummary = source.AckLatencySummary
)

// Ordering modes (ReadConfig.Ordering).
const (
	// OrderingNone (default) makes no ordering guarantee; several splits
	// may read one subscription.
	OrderingNone = source.OrderingNone
	// OrderingPerKey emits each subscription's messages in order per
	// ordering key, through one split and one stream per subscription.
	OrderingPerKey = source.OrderingPerKey
)

// Finalization modes (ReadConfig.Finalization).
const (
	// FinalizationAuto (default) asks for bundle finalization only on SDK
	// versions that deliver it.
	FinalizationAuto = source.FinalizationAuto
	// FinalizationOn always asks for it, for an SDK patched against the
	// Beam Go 2.77 defect.
	FinalizationOn = source.FinalizationOn
	// FinalizationOff never asks for it.
	FinalizationOff = source.FinalizationOff
)

// Decode policies (ReadConfig.DecodePolicy): what happens to a message
// whose payload does not hold ReadConfig.Format, or whose timestamp
// attribute is malformed.
const (
	// DecodeFail (default) fails the bundle naming the message, which is
	// redelivered.
	DecodeFail = model.DecodeFail
	// DecodeDrop acks it with its bundle and emits nothing.
	DecodeDrop = model.DecodeDrop
	// DecodeNack nacks it at once, for the subscription's dead-letter
	// policy.
	DecodeNack = model.DecodeNack
	// DecodeDeadLetter emits it on ReadWithDeadLetters' dead-letter output.
	DecodeDeadLetter = model.DecodeDeadLetter
)

// Late policies (ReadConfig.LatePolicy): what happens to a message the
// read emits behind the watermark it already reported. Either way it
// counts in late_messages.
const (
	// LateEmit (default) emits it at its event time.
	LateEmit = source.LateEmit
	// LateDeadLetter emits it on ReadWithDeadLetters' dead-letter output
	// (stage late) instead.
	LateDeadLetter = source.LateDeadLetter
)

// Commit modes (ReadConfig.Commit): when the read acks what a bundle
// emitted, once the runner has made its output durable.
const (
	// CommitAuto (default) is CommitFlinkCheckpoint with --runner=flink,
	// CommitResume otherwise.
	CommitAuto = source.CommitAuto
	// CommitResume acks at the split's next bundle: Prism and Dataflow
	// persist a residual only with its bundle's output.
	CommitResume = source.CommitResume
	// CommitFlinkCheckpoint acks once a completed Flink checkpoint covers
	// the bundle (ReadConfig.Flink).
	CommitFlinkCheckpoint = source.CommitFlinkCheckpoint
)

// Backlog modes (ReadConfig.Backlog): whether the read samples its
// subscriptions' backlog from Cloud Monitoring for progress, gauges and
// the watermark (docs/reading.md, Backlog).
const (
	// BacklogAuto (default) samples against production Pub/Sub, and beside
	// an emulator when Connection.MonitoringEndpoint is set.
	BacklogAuto = source.BacklogAuto
	// BacklogOff never samples.
	BacklogOff = source.BacklogOff
)

// Start positions (StartPosition.Kind); the functions below build them.
const (
	// PositionResume (default) reads from wherever the subscription is.
	PositionResume = source.PositionResume
	// PositionEarliestRetained replays everything still retained.
	PositionEarliestRetained = source.PositionEarliestRetained
	// PositionLatest drops the backlog.
	PositionLatest = source.PositionLatest
	// PositionTimestamp replays from StartPosition.Time.
	PositionTimestamp = source.PositionTimestamp
	// PositionSnapshot seeks to StartPosition.Snapshot.
	PositionSnapshot = source.PositionSnapshot
)

// StartEarliestRetained replays everything the subscription still retains.
func StartEarliestRetained() StartPosition { return source.StartEarliestRetained() }

// StartLatest drops the backlog, resolved when the job's seek runs.
func StartLatest() StartPosition { return source.StartLatest() }

// StartFromTimestamp replays from t: messages published before it count as
// acked, those after as unacked.
func StartFromTimestamp(t time.Time) StartPosition { return source.StartFromTimestamp(t) }

// StartFromSnapshot seeks to a snapshot: an ID in the subscription's
// project, or "projects/P/snapshots/S".
func StartFromSnapshot(name string) StartPosition { return source.StartFromSnapshot(name) }

// SubscriptionOf returns the subscription id in project.
func SubscriptionOf(project, id string) Subscription { return model.SubscriptionOf(project, id) }

// TopicOf returns the topic id in project.
func TopicOf(project, id string) Topic { return model.TopicOf(project, id) }

// ParseSubscription parses "projects/P/subscriptions/S".
func ParseSubscription(name string) (Subscription, error) { return model.ParseSubscription(name) }

// ParseTopic parses "projects/P/topics/T".
func ParseTopic(name string) (Topic, error) { return model.ParseTopic(name) }

// Read reads cfg.Subscriptions and cfg.Topics and returns a
// PCollection<Message> whose event time is each message's publish time
// (or cfg.TimestampAttribute). Each message is acked after the runner commits the bundle that emitted
// it. An invalid configuration panics at graph construction; TryRead
// returns it as an error.
func Read(s beam.Scope, cfg ReadConfig) beam.PCollection { return source.Read(s, cfg) }

// TryRead is Read returning the construction error instead of panicking.
func TryRead(s beam.Scope, cfg ReadConfig) (beam.PCollection, error) {
	return source.TryRead(s, cfg)
}

// ReadWithDeadLetters is Read that also returns the dead letters of
// DecodePolicy DecodeDeadLetter: a PCollection<FailedMessage>, for
// instance for WriteDeadLetters. Read rejects that policy, since it has
// nowhere to put them.
func ReadWithDeadLetters(s beam.Scope, cfg ReadConfig) (msgs, deadLetters beam.PCollection) {
	return source.ReadWithDeadLetters(s, cfg)
}

// TryReadWithDeadLetters is ReadWithDeadLetters returning the construction
// error instead of panicking.
func TryReadWithDeadLetters(s beam.Scope, cfg ReadConfig) (msgs, deadLetters beam.PCollection, err error) {
	return source.TryReadWithDeadLetters(s, cfg)
}

// AckLatency summarises, for this process, how long emitted messages
// waited between their emission and their ack: the runner's commit plus
// the read noticing it. Keep its P99 well under the subscription's ack
// deadline. On a distributed runner each worker holds its own.
func AckLatency() AckLatencySummary { return source.AckLatency() }

// ResetAckLatency forgets what AckLatency has seen.
func ResetAckLatency() { source.ResetAckLatency() }
