package sink

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/option"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// CreateDisposition says what a publish to a missing topic does.
type CreateDisposition string

const (
	// CreateIfNeeded (default) creates a topic that a publish found missing
	// (NOT_FOUND), with TopicCreate's settings, and republishes what failed.
	CreateIfNeeded CreateDisposition = "CREATE_IF_NEEDED"
	// CreateNever fails the bundle on a missing topic: for pipelines where a
	// missing topic means a routing bug.
	CreateNever CreateDisposition = "CREATE_NEVER"
)

// FailurePolicy says what happens to a message Pub/Sub will not take: one
// that breaks Pub/Sub's limits (checked before sending) or one Pub/Sub
// rejected when it was published alone. Nothing else is routed: an outage
// (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, PERMISSION_DENIED...)
// or a configuration error fails the bundle under every policy, so a service
// incident never drains a stream one dropped message at a time.
type FailurePolicy string

const (
	// PolicyFail (default) fails the bundle: a runner that retries bundles
	// publishes it again; Prism fails the job. It is the only policy that
	// never leaves a gap in the output.
	PolicyFail FailurePolicy = "FAIL"
	// PolicyDrop logs each failed message at warning level with its
	// destination and status, counts it, and drops it.
	PolicyDrop FailurePolicy = "DROP"
	// PolicyDeadLetter emits each failed message, as a dlq.FailedMessage, to
	// the PCollection Write returns.
	PolicyDeadLetter FailurePolicy = "DEAD_LETTER"
)

// Defaults of the writer's own options; the reasons are on the Config
// fields.
const (
	DefaultMaxInFlightMessages      = 1000
	DefaultMaxInFlightBytes         = 64 << 20
	DefaultMaxActivePublishers      = 100
	DefaultDestinationIdleTimeout   = time.Hour
	DefaultPublishProgressTimeout   = 10 * time.Minute
	DefaultShutdownTimeout          = 30 * time.Second
	DefaultRecoveryInitialBackoff   = 500 * time.Millisecond
	DefaultRecoveryMaxBackoff       = 10 * time.Second
	DefaultRecoveryMaxAttempts      = 10
	DefaultRecoveryJitter           = 0.25
	DefaultMaxConsecutiveRejections = 100
)

// Defaults of the publisher options: the client's own, so the sink batches
// like the Publisher users already know. DefaultPublishSettings is a
// variable, so these are spelled out; a test pins them to it, so a client
// upgrade that changes a default is noticed.
const (
	DefaultDelayThreshold            = 10 * time.Millisecond // pubsub.DefaultPublishSettings
	DefaultCountThreshold            = 100                   // pubsub.DefaultPublishSettings
	DefaultByteThreshold             = 1e6                   // pubsub.DefaultPublishSettings
	DefaultPublishTimeout            = 60 * time.Second      // pubsub.DefaultPublishSettings
	DefaultCompressionBytesThreshold = 240                   // pubsub.DefaultPublishSettings
	// The Publish retry backoff of apiv1's defaultTopicAdminCallOptions.
	DefaultRetryInitialBackoff = 100 * time.Millisecond
	DefaultRetryMaxBackoff     = 60 * time.Second
	DefaultRetryMultiplier     = 4.0
)

// publishRetryCodes are the codes apiv1 retries a Publish on by default
// (defaultTopicAdminCallOptions). Only the backoff is an option: which codes
// are transient is the client's knowledge, not a tuning knob.
var publishRetryCodes = []codes.Code{
	codes.Aborted,
	codes.Canceled,
	codes.Internal,
	codes.ResourceExhausted,
	codes.Unknown,
	codes.Unavailable,
	codes.DeadlineExceeded,
}

// Config configures a write. Every zero field takes the default documented
// on it. Config is validated at graph construction: an invalid one never
// reaches a worker.
type Config struct {
	// Topic is the default destination, used for every message whose own
	// Topic is unset. It may be left unset when every message names its
	// topic; a message that names none then fails its bundle.
	Topic model.Topic

	// Publisher tunes the client's publishers; see PublisherOptions.
	Publisher PublisherOptions

	// MaxInFlightMessages caps the publishes one writer has accepted and
	// Pub/Sub has not yet confirmed (default 1,000). ProcessElement blocks
	// at the cap until confirmations free room, which is the sink's
	// backpressure. Larger values help only when the round trip, not the
	// service, is the bottleneck.
	MaxInFlightMessages int

	// MaxInFlightBytes caps the serialized size of those publishes (default
	// 64 MiB). The message count alone bounds no memory: Pub/Sub allows
	// 10 MB per message, and a publish being retried through an outage is
	// held for the whole retry. A message larger than the cap is still
	// admitted when nothing else is in flight, so it never deadlocks.
	// Sizing: this times the writers sharing a worker must fit its memory.
	MaxInFlightBytes int64

	// MaxActivePublishers bounds the per-topic publishers one writer keeps
	// (default 100); each holds a batcher and goroutines. A new destination
	// at the cap releases the least recently used publisher that has nothing
	// in flight and nothing to repair, or else first drains everything: the
	// cap never drops a message.
	MaxActivePublishers int

	// DestinationIdleTimeout releases a publisher unused for longer than this
	// (default 1 h), checked after each successful FinishBundle. A later
	// message to that topic creates a new one.
	DestinationIdleTimeout time.Duration

	// PublishProgressTimeout bounds every wait for Pub/Sub to confirm
	// publishes: at the in-flight caps, in FinishBundle, in eviction and in
	// repairs (default 10 min). The client ends every batch's retries at
	// Publisher.Timeout (60 s by default), so while it works some verdict
	// arrives at least that often, and the budget runs out only when the
	// client itself stops answering. It bounds a stall, not a slow topic:
	// the budget restarts at every completion. A wait with no completion
	// for a tenth of it logs a warning naming Pub/Sub and what is
	// outstanding; at the full budget the bundle fails and the runner
	// retries it.
	PublishProgressTimeout time.Duration

	// ShutdownTimeout bounds releasing publishers (default 30 s). A release
	// asks every selected publisher to stop and then waits once for all of
	// them, so it costs one timeout however many topics it covers. A
	// publisher that does not stop in time is abandoned, logged and counted.
	ShutdownTimeout time.Duration

	// CreateDisposition is CreateIfNeeded (default) or CreateNever.
	CreateDisposition CreateDisposition

	// TopicCreate configures the topics the sink creates; it is rejected with
	// CreateNever, where it would configure nothing.
	TopicCreate TopicCreateOptions

	// RecoveryInitialBackoff, RecoveryMaxBackoff, RecoveryMaxAttempts and
	// RecoveryJitter shape the republish of parked messages after a repair
	// (defaults 500 ms doubling to 10 s, 10 attempts, +-25 %: about a minute
	// per destination, to cover a new topic's metadata propagating). The
	// jitter keeps writers that all parked messages for the same missing
	// topic from republishing in lockstep. Exhausting the attempts fails the
	// bundle.
	RecoveryInitialBackoff time.Duration
	RecoveryMaxBackoff     time.Duration
	RecoveryMaxAttempts    int
	RecoveryJitter         float64

	// FailurePolicy is PolicyFail (default), PolicyDrop or PolicyDeadLetter.
	FailurePolicy FailurePolicy

	// MaxConsecutiveRejections fails the bundle once this many messages in a
	// row were rejected (before sending or by Pub/Sub alone) with no
	// successful publish between them (default 100; -1 for no bound). A
	// dropping policy is meant for the odd bad record, not for a stream
	// Pub/Sub refuses wholesale. Any successful publish resets the count.
	MaxConsecutiveRejections int

	// PerDestinationMetrics adds records and bytes counters per topic. Off
	// by default: the runner keeps every metric name a job ever reported,
	// so with dynamic destinations the series grow with every topic
	// written. Turn it on when the set of topics is small and known.
	PerDestinationMetrics bool

	// Connection says where and as whom to connect: EmulatorEndpoint
	// (host:port, plaintext, no credentials) or CredentialsFile (a
	// service-account key path read on the worker); neither means
	// application-default credentials against Pub/Sub.
	Connection connection.Settings
}

// PublisherOptions map 1:1 onto the client's PublishSettings and its
// Publish retry backoff. Zero fields take the client's defaults.
//
// The client's flow control is not exposed: the writer's own caps bound
// what is in flight, and the client's, when set to block, blocks inside
// Publish where no progress budget applies. Hedging is not exposed either:
// the client refuses it with ordering, and a hedged duplicate defeats the
// sink's per-message verdicts.
type PublisherOptions struct {
	// DelayThreshold sends a non-empty batch after this delay (default
	// 10 ms). Blocking at an in-flight cap and FinishBundle flush
	// regardless, so a long delay costs latency, never a stall.
	DelayThreshold time.Duration
	// CountThreshold sends a batch at this many messages (default 100; at
	// most 1,000, Pub/Sub's per-request limit, which the client would
	// otherwise impose silently).
	CountThreshold int
	// ByteThreshold sends a batch at this many bytes (default 1e6; at most
	// 1e7, Pub/Sub's per-request limit).
	ByteThreshold int
	// NumGoroutines is the client's publish concurrency (default 0: the
	// client's 25 x GOMAXPROCS).
	NumGoroutines int
	// Timeout bounds one batch's publish, retries included (default 60 s,
	// the client's). The client applies it to ordered publishes too.
	Timeout time.Duration
	// EnableCompression gzips requests larger than CompressionBytesThreshold
	// bytes (default off and 240, the client's).
	EnableCompression         bool
	CompressionBytesThreshold int
	// RetryInitialBackoff, RetryMaxBackoff and RetryMultiplier shape the
	// client's retry of a failed Publish RPC on transient codes (defaults
	// 100 ms, 60 s and 4, the client's). Timeout bounds the whole retry.
	RetryInitialBackoff time.Duration
	RetryMaxBackoff     time.Duration
	RetryMultiplier     float64
	// EnableMessageOrdering publishes messages that share an ordering key
	// in order. It must be set for any message to carry an OrderingKey.
	// Order holds per key per writer: key the input by ordering key upstream
	// so that one key's messages reach one writer.
	EnableMessageOrdering bool
}

// TopicCreateOptions configure topics the sink creates. Each is optional;
// unset leaves Pub/Sub's own default. They apply only to creation: an
// existing topic keeps its settings and is never compared or updated.
type TopicCreateOptions struct {
	// MessageRetention makes the topic keep messages, acked or not, for this
	// long (10 min to 31 days): what lets a subscription created later, or a
	// seek back, reach messages published before it existed. An
	// auto-created topic has no subscriptions, so without it messages
	// published before a consumer subscribes are kept for nobody.
	MessageRetention time.Duration
	// KMSKeyName encrypts the topic with a customer-managed key,
	// "projects/P/locations/L/keyRings/R/cryptoKeys/K". The Pub/Sub service
	// account needs encrypt/decrypt on it, or publishes to the topic fail.
	KMSKeyName string
	// AllowedPersistenceRegions restricts where Pub/Sub stores the topic's
	// messages.
	AllowedPersistenceRegions []string
	// EnforceInTransit also keeps messages in those regions in transit; it
	// requires AllowedPersistenceRegions.
	EnforceInTransit bool
}

// IsZero reports whether no option is set.
func (o TopicCreateOptions) IsZero() bool {
	return o.MessageRetention == 0 && o.KMSKeyName == "" && len(o.AllowedPersistenceRegions) == 0 && !o.EnforceInTransit
}

// Pub/Sub's bounds on a topic's message retention.
const (
	minTopicRetention = 10 * time.Minute
	maxTopicRetention = 31 * 24 * time.Hour
)

var (
	kmsKeyPattern = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$`)
	regionPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*[a-z0-9]$`)
)

// withDefaults returns cfg with every zero field set to its default and the
// whole configuration validated. Errors name the field and the value.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.CreateDisposition == "" {
		cfg.CreateDisposition = CreateIfNeeded
	}
	if cfg.FailurePolicy == "" {
		cfg.FailurePolicy = PolicyFail
	}
	option.Default(&cfg.MaxInFlightMessages, DefaultMaxInFlightMessages)
	option.Default(&cfg.MaxInFlightBytes, DefaultMaxInFlightBytes)
	option.Default(&cfg.MaxActivePublishers, DefaultMaxActivePublishers)
	option.Default(&cfg.DestinationIdleTimeout, DefaultDestinationIdleTimeout)
	option.Default(&cfg.PublishProgressTimeout, DefaultPublishProgressTimeout)
	option.Default(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	option.Default(&cfg.RecoveryInitialBackoff, DefaultRecoveryInitialBackoff)
	option.Default(&cfg.RecoveryMaxBackoff, DefaultRecoveryMaxBackoff)
	option.Default(&cfg.RecoveryMaxAttempts, DefaultRecoveryMaxAttempts)
	option.Default(&cfg.RecoveryJitter, DefaultRecoveryJitter)
	option.Default(&cfg.MaxConsecutiveRejections, DefaultMaxConsecutiveRejections)
	p := &cfg.Publisher
	option.Default(&p.DelayThreshold, DefaultDelayThreshold)
	option.Default(&p.CountThreshold, DefaultCountThreshold)
	option.Default(&p.ByteThreshold, DefaultByteThreshold)
	option.Default(&p.Timeout, DefaultPublishTimeout)
	option.Default(&p.CompressionBytesThreshold, DefaultCompressionBytesThreshold)
	option.Default(&p.RetryInitialBackoff, DefaultRetryInitialBackoff)
	option.Default(&p.RetryMaxBackoff, DefaultRetryMaxBackoff)
	option.Default(&p.RetryMultiplier, DefaultRetryMultiplier)
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
	atLeastOne := func(name string, v int64) {
		if v < 1 {
			bad("%s %d must be at least 1", name, v)
		}
	}
	atLeastOne("MaxInFlightMessages", int64(cfg.MaxInFlightMessages))
	atLeastOne("MaxInFlightBytes", cfg.MaxInFlightBytes)
	atLeastOne("MaxActivePublishers", int64(cfg.MaxActivePublishers))
	atLeastOne("RecoveryMaxAttempts", int64(cfg.RecoveryMaxAttempts))
	if cfg.MaxConsecutiveRejections < -1 {
		bad("MaxConsecutiveRejections %d must be positive, or -1 for no bound", cfg.MaxConsecutiveRejections)
	}
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			bad("%s %v must be positive", name, d)
		}
	}
	positive("DestinationIdleTimeout", cfg.DestinationIdleTimeout)
	positive("PublishProgressTimeout", cfg.PublishProgressTimeout)
	positive("ShutdownTimeout", cfg.ShutdownTimeout)
	positive("RecoveryInitialBackoff", cfg.RecoveryInitialBackoff)
	positive("RecoveryMaxBackoff", cfg.RecoveryMaxBackoff)
	if cfg.RecoveryMaxBackoff > 0 && cfg.RecoveryInitialBackoff > cfg.RecoveryMaxBackoff {
		bad("RecoveryInitialBackoff %v must not exceed RecoveryMaxBackoff %v", cfg.RecoveryInitialBackoff, cfg.RecoveryMaxBackoff)
	}
	if j := cfg.RecoveryJitter; j <= 0 || j >= 1 {
		bad("RecoveryJitter %v must be a fraction between 0 and 1 (exclusive), e.g. 0.25 for +-25 %%", j)
	}

	switch cfg.FailurePolicy {
	case PolicyFail, PolicyDrop, PolicyDeadLetter:
	default:
		bad("FailurePolicy %q is unknown; use %q, %q or %q", cfg.FailurePolicy, PolicyFail, PolicyDrop, PolicyDeadLetter)
	}
	switch cfg.CreateDisposition {
	case CreateIfNeeded:
	case CreateNever:
		if !cfg.TopicCreate.IsZero() {
			bad("TopicCreate is set but CreateDisposition is %s: the sink never creates a topic, so the options would configure nothing; drop them or use %s", CreateNever, CreateIfNeeded)
		}
	default:
		bad("CreateDisposition %q is unknown; use %q or %q", cfg.CreateDisposition, CreateIfNeeded, CreateNever)
	}
	errs = append(errs, cfg.TopicCreate.validate()...)
	errs = append(errs, cfg.Publisher.validate()...)
	if err := cfg.Connection.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pubsubio.Write: invalid configuration: %w", err)
	}
	return nil
}

func (p PublisherOptions) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.DelayThreshold <= 0 {
		bad("Publisher.DelayThreshold %v must be positive", p.DelayThreshold)
	}
	// The client clamps a larger CountThreshold to MaxPublishRequestCount
	// without a word (publisher.go, initBundler), and a ByteThreshold above
	// the request limit is never reached because the bundler closes a batch
	// at its byte limit first: both would be settings that do nothing.
	if p.CountThreshold < 1 || p.CountThreshold > pubsub.MaxPublishRequestCount {
		bad("Publisher.CountThreshold %d must be between 1 and %d, Pub/Sub's messages per request", p.CountThreshold, pubsub.MaxPublishRequestCount)
	}
	if p.ByteThreshold < 1 || p.ByteThreshold > pubsub.MaxPublishRequestBytes {
		bad("Publisher.ByteThreshold %d must be between 1 and %d, Pub/Sub's bytes per request", p.ByteThreshold, int(pubsub.MaxPublishRequestBytes))
	}
	if p.NumGoroutines < 0 {
		bad("Publisher.NumGoroutines %d must not be negative (0 uses the client's default)", p.NumGoroutines)
	}
	// The client reads 0 as "no timeout"; the sink's waits are bounded by
	// PublishProgressTimeout, but a publish nothing ends would hold its
	// message and its place under the caps until that budget fails the
	// bundle, so an unbounded publish is not offered.
	if p.Timeout <= 0 {
		bad("Publisher.Timeout %v must be positive", p.Timeout)
	}
	if p.CompressionBytesThreshold < 0 {
		bad("Publisher.CompressionBytesThreshold %d must not be negative", p.CompressionBytesThreshold)
	} else if !p.EnableCompression && p.CompressionBytesThreshold != DefaultCompressionBytesThreshold {
		// The client reads the threshold only when compression is on
		// (publisher.go, shouldCompress): without it the setting does nothing.
		bad("Publisher.CompressionBytesThreshold %d does nothing unless Publisher.EnableCompression is set; set it, or drop the threshold", p.CompressionBytesThreshold)
	}
	if p.RetryInitialBackoff <= 0 || p.RetryMaxBackoff <= 0 {
		bad("Publisher.RetryInitialBackoff %v and RetryMaxBackoff %v must be positive", p.RetryInitialBackoff, p.RetryMaxBackoff)
	} else if p.RetryInitialBackoff > p.RetryMaxBackoff {
		bad("Publisher.RetryInitialBackoff %v must not exceed RetryMaxBackoff %v", p.RetryInitialBackoff, p.RetryMaxBackoff)
	}
	if p.RetryMultiplier < 1 {
		bad("Publisher.RetryMultiplier %v must be at least 1", p.RetryMultiplier)
	}
	// Unlike the Java client, which replaces the retry settings of an
	// ordering-enabled publisher with "retry forever", the Go client treats
	// ordered and unordered batches alike: publishMessageBundle applies the
	// same retryer and the same Timeout-bounded context to both (only
	// hedging is skipped for ordered batches, publisher.go canHedge). So
	// Timeout and the retry backoff combine with EnableMessageOrdering and
	// nothing here has to be rejected for it.
	return errs
}

func (o TopicCreateOptions) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r := o.MessageRetention; r != 0 && (r < minTopicRetention || r > maxTopicRetention) {
		bad("TopicCreate.MessageRetention %v must be between %v and %v (31 days), or 0 for none", r, minTopicRetention, maxTopicRetention)
	}
	if o.KMSKeyName != "" && !kmsKeyPattern.MatchString(o.KMSKeyName) {
		bad("TopicCreate.KMSKeyName %q is not a key name of the form projects/P/locations/L/keyRings/R/cryptoKeys/K", o.KMSKeyName)
	}
	for i, r := range o.AllowedPersistenceRegions {
		if !regionPattern.MatchString(r) {
			bad("TopicCreate.AllowedPersistenceRegions[%d] %q is not a region name such as europe-west1", i, r)
		} else if slices.Index(o.AllowedPersistenceRegions, r) != i {
			bad("TopicCreate.AllowedPersistenceRegions[%d] %q is listed twice", i, r)
		}
	}
	if o.EnforceInTransit && len(o.AllowedPersistenceRegions) == 0 {
		bad("TopicCreate.EnforceInTransit needs AllowedPersistenceRegions: it keeps messages in transit inside those regions")
	}
	return errs
}

// publishSettings maps the options onto the client's settings. Everything
// not exposed keeps the client's default.
func (p PublisherOptions) publishSettings() pubsub.PublishSettings {
	s := pubsub.DefaultPublishSettings
	s.DelayThreshold = p.DelayThreshold
	s.CountThreshold = p.CountThreshold
	s.ByteThreshold = p.ByteThreshold
	s.NumGoroutines = p.NumGoroutines
	s.Timeout = p.Timeout
	s.EnableCompression = p.EnableCompression
	s.CompressionBytesThreshold = p.CompressionBytesThreshold
	return s
}

// publishCallOptions are the client-wide Publish call options carrying the
// retry backoff. The publisher resolves them for every batch
// (publishMessageBundle reads TopicAdminClient.CallOptions.Publish) and
// wraps the retryer in its own; the per-attempt timeout of the defaults is
// moot because the batch's context already carries Timeout.
func (p PublisherOptions) publishCallOptions() []gax.CallOption {
	bo := gax.Backoff{Initial: p.RetryInitialBackoff, Max: p.RetryMaxBackoff, Multiplier: p.RetryMultiplier}
	return []gax.CallOption{
		gax.WithTimeout(p.Timeout),
		gax.WithRetry(func() gax.Retryer { return gax.OnCodes(publishRetryCodes, bo) }),
	}
}

// topicProto is the topic the sink creates for name.
func (o TopicCreateOptions) topicProto(name model.Topic) *pubsubpb.Topic {
	t := &pubsubpb.Topic{Name: name.String(), KmsKeyName: o.KMSKeyName}
	if o.MessageRetention > 0 {
		t.MessageRetentionDuration = durationpb.New(o.MessageRetention)
	}
	if len(o.AllowedPersistenceRegions) > 0 || o.EnforceInTransit {
		t.MessageStoragePolicy = &pubsubpb.MessageStoragePolicy{
			AllowedPersistenceRegions: slices.Clone(o.AllowedPersistenceRegions),
			EnforceInTransit:          o.EnforceInTransit,
		}
	}
	return t
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

// describe names the effective options in errors and logs.
func (o TopicCreateOptions) describe() string {
	if o.IsZero() {
		return "Pub/Sub's defaults"
	}
	var parts []string
	if o.MessageRetention > 0 {
		parts = append(parts, fmt.Sprintf("retention %v", o.MessageRetention))
	}
	if o.KMSKeyName != "" {
		parts = append(parts, "KMS key "+o.KMSKeyName)
	}
	if len(o.AllowedPersistenceRegions) > 0 {
		parts = append(parts, "regions "+strings.Join(o.AllowedPersistenceRegions, ","))
	}
	if o.EnforceInTransit {
		parts = append(parts, "enforced in transit")
	}
	return strings.Join(parts, ", ")
}
