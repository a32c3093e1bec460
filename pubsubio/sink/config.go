package sink

import (
	"fmt"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// CreateDisposition says what a publish to a missing topic does.
type CreateDisposition string

const (
	// CreateIfNeeded (default) creates a topic that a publish found missing
	// (NOT_FOUND), with TopicCreate's settings, and republishes what failed.
	CreateIfNeeded CreateDisposition = "CREATE_IF_NEEDED"
	// CreateNever never creates a topic: for pipelines where a missing topic
	// means a routing bug. Under PolicyFail a missing topic fails the
	// bundle; under PolicyDrop and PolicyDeadLetter each message to it is a
	// rejected message (stage publish, NOT_FOUND).
	CreateNever CreateDisposition = "CREATE_NEVER"
)

// Defaults of the writer's own options; the reasons are on the Config
// fields.
const (
	DefaultMaxActivePublishers      = 100
	DefaultMaxInFlightMessages      = DefaultMaxActivePublishers * DefaultCountThreshold
	DefaultMaxInFlightBytes         = 64 << 20
	DefaultMaxGroupedMessages       = 30000
	DefaultDestinationIdleTimeout   = time.Hour
	DefaultPublishProgressTimeout   = 10 * time.Minute
	DefaultShutdownTimeout          = 30 * time.Second
	DefaultRecoveryInitialBackoff   = 500 * time.Millisecond
	DefaultRecoveryMaxBackoff       = 10 * time.Second
	DefaultRecoveryMaxAttempts      = 10
	DefaultRecoveryJitter           = 0.25
	DefaultMaxConsecutiveRejections = 100
)

// Config configures a write. Every zero field takes the default documented
// on it. Config is validated at graph construction: an invalid one never
// reaches a worker. Every count and duration is bounded (limits.go); an
// error names the option, the value and the range.
type Config struct {
	// Topic is the default destination, used for every message whose own
	// Topic is unset. It may be left unset when every message names its
	// topic; a message that names none then fails its bundle.
	Topic model.Topic

	// Publisher tunes the client's publishers; see PublisherOptions.
	Publisher PublisherOptions

	// TimestampAttribute, when set, names an attribute Write sets on every
	// message to its element's event time in Unix milliseconds, the form
	// Beam's Pub/Sub readers and ReadConfig.TimestampAttribute parse: a
	// downstream read takes its event time from it instead of the publish
	// time. It replaces a value the element carries. Elements of
	// beam.Create carry Beam's minimum timestamp, -9223372036854775.
	TimestampAttribute string

	// IDAttribute, when set, names an attribute Write sets on every message
	// to an ID derived from the element, so that the same element published
	// twice (a retried bundle, an input redelivered after a crash) carries
	// the same ID and a downstream Deduplicate keyed on it keeps one: a hash
	// (32 hex digits) of the element's ID and subscription when it came
	// from a read, its data, attributes (but the trace context, which a
	// traced read sets anew for each delivery), ordering key and event
	// time.
	// Elements equal in all of these share an ID, so only the first passes
	// a deduplication: give distinct ones an attribute of their own. A
	// transform that adds something per attempt (the time, a random value)
	// gives each attempt its own ID. An element that already carries the
	// attribute keeps its value (a publisher's own ID survives a
	// Read -> Write pipeline).
	IDAttribute string

	// MaxInFlightMessages caps the publishes one writer has accepted and
	// Pub/Sub has not yet confirmed: at the cap, ProcessElement flushes
	// every batch and blocks until confirmations free room, which is the
	// sink's backpressure. If zero, DefaultMaxInFlightMessages (10,000) is
	// used: one full batch (Publisher.CountThreshold, 100) for each of
	// MaxActivePublishers (100), so that a writer spreading messages over
	// many topics still sends full batches; MaxInFlightBytes bounds the
	// memory. docs/writing.md, Batching.
	MaxInFlightMessages int

	// MaxInFlightBytes caps the serialized size of those publishes, so that
	// memory is bounded whatever the message size (Pub/Sub allows 10 MB). A
	// message larger than the cap is admitted when nothing else is in
	// flight, so it never deadlocks. If zero, DefaultMaxInFlightBytes
	// (64 MiB) is used. This times the writers on a worker must fit its
	// memory.
	MaxInFlightBytes int64

	// MaxActivePublishers bounds the per-topic publishers one writer keeps;
	// each holds a batcher and goroutines. Messages to a destination with
	// no publisher at the cap wait in a group until it fills a batch
	// (Publisher.CountThreshold or ByteThreshold), MaxGroupedMessages or
	// MaxInFlightBytes is reached, or the bundle ends; the group is then
	// published through a publisher that replaces the least recently used
	// one holding nothing, after draining everything if none is idle: the
	// cap never drops a message. Such messages do not leave after
	// Publisher.DelayThreshold. If zero, DefaultMaxActivePublishers (100) is
	// used.
	MaxActivePublishers int

	// MaxGroupedMessages caps the messages waiting in groups for a
	// publisher (see MaxActivePublishers); they count against
	// MaxInFlightBytes too, but not against MaxInFlightMessages, which
	// bounds what Pub/Sub has yet to confirm: otherwise, with more
	// destinations than publishers, groups could only hold that cap shared
	// out, a few messages each, and every few messages would cost a
	// publisher. At the cap every group is published. If zero,
	// DefaultMaxGroupedMessages (30,000: a batch of 100 for each of 300
	// destinations) is used. BENCHMARKS.md, Saturation, has the effect.
	MaxGroupedMessages int

	// DestinationIdleTimeout releases a publisher unused for this long,
	// checked after each successful bundle. If zero,
	// DefaultDestinationIdleTimeout (1 h) is used.
	DestinationIdleTimeout time.Duration

	// PublishProgressTimeout fails the bundle when Pub/Sub has confirmed
	// nothing for this long in a wait (at the caps, at the end of the
	// bundle, in eviction and repairs); a wait with no confirmation for a
	// tenth of it logs a warning. It bounds a stall, not a slow topic: it
	// restarts at every confirmation, and the client ends every batch's
	// retries at Publisher.Timeout. If zero, DefaultPublishProgressTimeout
	// (10 min) is used.
	PublishProgressTimeout time.Duration

	// ShutdownTimeout bounds releasing publishers: a release asks every
	// selected publisher to stop and waits once for all of them. A
	// publisher that does not stop in time is abandoned, logged and counted
	// (publisher_shutdowns_abandoned). If zero, DefaultShutdownTimeout
	// (30 s) is used.
	ShutdownTimeout time.Duration

	// CreateDisposition is CreateIfNeeded (default) or CreateNever.
	CreateDisposition CreateDisposition

	// TopicCreate configures the topics the sink creates; it is rejected
	// with CreateNever, where it would configure nothing.
	TopicCreate TopicCreateOptions

	// RecoveryInitialBackoff, RecoveryMaxBackoff, RecoveryMaxAttempts and
	// RecoveryJitter shape the republish of parked messages in a repair.
	// If zero, 500 ms doubling to 10 s, 10 attempts and +-25 % are used:
	// about a minute per destination, for a new topic's metadata to
	// propagate. The jitter keeps writers that parked messages for the same
	// missing topic from republishing in lockstep. Exhausting the attempts
	// fails the bundle.
	RecoveryInitialBackoff time.Duration
	RecoveryMaxBackoff     time.Duration
	RecoveryMaxAttempts    int
	RecoveryJitter         float64

	// FailurePolicy is PolicyFail (default), PolicyDrop or PolicyDeadLetter.
	FailurePolicy model.FailurePolicy

	// MaxConsecutiveRejections fails the bundle once this many messages in
	// a row were rejected with no successful publish between them: a
	// dropping policy is for the odd bad record, not for a stream Pub/Sub
	// refuses wholesale. -1 sets no bound. If zero,
	// DefaultMaxConsecutiveRejections (100) is used.
	MaxConsecutiveRejections int

	// PerDestinationMetrics adds records and bytes counters per topic. Off
	// by default: the runner keeps every metric name a job reported, so with
	// dynamic destinations the series grow with every topic written.
	PerDestinationMetrics bool

	// Tracing, when true, gives each message an OpenTelemetry publish
	// span, a child of the trace context the message carries in its
	// attributes (that of a traced Read's receive span, or one user code
	// set with WithTraceContext), from its acceptance until Pub/Sub
	// confirmed or refused it, and publishes the message carrying the
	// span's context, so that a traced consumer continues the same trace.
	// Spans go to the global TracerProvider, as the client's do. Default
	// off: no span, no cost, and trace context a message carries is
	// published as it is. docs/tracing.md, Tracing.
	Tracing bool

	// Connection says where and as whom to connect. The zero value is
	// application-default credentials against Pub/Sub.
	Connection connection.Settings
}

// withDefaults returns cfg with every zero field set to its default and the
// whole configuration validated. Errors name the field and the value.
func (cfg Config) withDefaults() (Config, error) {
	construct.Default(&cfg.CreateDisposition, CreateIfNeeded)
	construct.Default(&cfg.FailurePolicy, model.PolicyFail)
	construct.Default(&cfg.MaxInFlightMessages, DefaultMaxInFlightMessages)
	construct.Default(&cfg.MaxInFlightBytes, DefaultMaxInFlightBytes)
	construct.Default(&cfg.MaxActivePublishers, DefaultMaxActivePublishers)
	construct.Default(&cfg.MaxGroupedMessages, DefaultMaxGroupedMessages)
	construct.Default(&cfg.DestinationIdleTimeout, DefaultDestinationIdleTimeout)
	construct.Default(&cfg.PublishProgressTimeout, DefaultPublishProgressTimeout)
	construct.Default(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	construct.Default(&cfg.RecoveryInitialBackoff, DefaultRecoveryInitialBackoff)
	construct.Default(&cfg.RecoveryMaxBackoff, DefaultRecoveryMaxBackoff)
	construct.Default(&cfg.RecoveryMaxAttempts, DefaultRecoveryMaxAttempts)
	construct.Default(&cfg.RecoveryJitter, DefaultRecoveryJitter)
	construct.Default(&cfg.MaxConsecutiveRejections, DefaultMaxConsecutiveRejections)
	cfg.Publisher = cfg.Publisher.withDefaults()
	return cfg, cfg.validate()
}

func (cfg Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if !cfg.Topic.IsZero() {
		if err := cfg.Topic.Validate(); err != nil {
			bad("Topic: %w", err)
		}
	}
	errs = append(errs, cfg.checkLimits()...)
	for _, a := range []struct{ option, name, instead string }{
		{"TimestampAttribute", cfg.TimestampAttribute, "name the attribute to carry the event time, or leave it empty"},
		{"IDAttribute", cfg.IDAttribute, "name the attribute to carry the ID, or leave it empty"},
	} {
		if err := construct.CheckAttribute(a.option, a.name, a.instead); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.IDAttribute != "" && cfg.IDAttribute == cfg.TimestampAttribute {
		bad("IDAttribute and TimestampAttribute are both %q: one attribute cannot hold both; name two", cfg.IDAttribute)
	}
	if cfg.MaxConsecutiveRejections < -1 || cfg.MaxConsecutiveRejections > maxConsecutiveRejections {
		bad("MaxConsecutiveRejections %d must be between 1 and %d, or -1 for no bound", cfg.MaxConsecutiveRejections, maxConsecutiveRejections)
	}
	// Written so that NaN, which fails every comparison, is refused too.
	if j := cfg.RecoveryJitter; !(j > 0 && j < 1) {
		bad("RecoveryJitter %v must be a fraction between 0 and 1 (exclusive), e.g. 0.25 for +-25 %%", j)
	}

	switch cfg.FailurePolicy {
	case model.PolicyFail, model.PolicyDrop, model.PolicyDeadLetter:
	default:
		bad("FailurePolicy %q is unknown; use %q, %q or %q", text.Truncate(string(cfg.FailurePolicy), maxQuoted), model.PolicyFail, model.PolicyDrop, model.PolicyDeadLetter)
	}
	switch cfg.CreateDisposition {
	case CreateIfNeeded:
	case CreateNever:
		if !cfg.TopicCreate.IsZero() {
			bad("TopicCreate is set but CreateDisposition is %s, so it would configure nothing; drop it or use %s", CreateNever, CreateIfNeeded)
		}
	default:
		bad("CreateDisposition %q is unknown; use %q or %q", text.Truncate(string(cfg.CreateDisposition), maxQuoted), CreateIfNeeded, CreateNever)
	}
	errs = append(errs, cfg.TopicCreate.validate()...)
	errs = append(errs, cfg.Publisher.validate()...)
	if err := cfg.Connection.Validate(); err != nil {
		errs = append(errs, err)
	}
	return construct.Invalid("pubsubio.Write", errs...)
}

// clientProject is the project the writer's client is built for. Every
// publish and creation names its topic in full, so the project only has to
// be non-empty; the default topic's is the natural choice.
func (cfg Config) clientProject() string {
	if cfg.Topic.Project != "" {
		return cfg.Topic.Project
	}
	return "pubsubio-sink"
}
