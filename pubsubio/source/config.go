package source

import (
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

// Defaults. Where the Pub/Sub client has a default, it is the client's, so a
// read behaves like the client users already know; the reasons for the
// rest are on the fields of Config.
const (
	DefaultMaxOutstandingMessages = 2000                   // twice pubsub.DefaultReceiveSettings; see Config.MaxOutstandingMessages
	DefaultMaxOutstandingBytes    = 1e9                    // pubsub.DefaultReceiveSettings; see Config.MaxOutstandingBytes
	DefaultMaxExtension           = 60 * time.Minute       // pubsub.DefaultReceiveSettings
	DefaultParallelPullCount      = 1                      // pubsub.DefaultReceiveSettings.NumGoroutines
	DefaultShutdownTimeout        = 10 * time.Second       // see Config.ShutdownTimeout
	DefaultMaxRecordsPerBundle    = 1000                   // see Config.MaxRecordsPerBundle
	DefaultBufferMaxMessages      = 40000                  // see Config.BufferMaxMessages
	DefaultBufferMaxBytes         = 64 << 20               // see Config.BufferMaxBytes
	DefaultFlinkBufferMaxMessages = 200000                 // under CommitFlinkCheckpoint; see Config.BufferMaxMessages
	DefaultFlinkBufferMaxBytes    = 256 << 20              // under CommitFlinkCheckpoint; see Config.BufferMaxBytes
	DefaultLeaseIdle              = 2 * time.Minute        // see Config.LeaseIdle
	DefaultPollDelay              = 100 * time.Millisecond // see Config.PollDelay
	DefaultWatermarkWindow        = time.Minute            // see Config.WatermarkWindow
	DefaultWatermarkIdle          = 10 * time.Second       // see Config.WatermarkIdle
	DefaultWatermarkLateness      = time.Second            // see Config.WatermarkLateness
	DefaultWatermarkMaxOutage     = 5 * time.Minute        // see Config.WatermarkMaxOutage
	DefaultFlinkPatience          = 10 * time.Minute       // see FlinkCheckpoints.Patience
)

// Config configures a read. Only Subscriptions or Topics is required;
// every zero field takes the default documented on it. Config is validated at graph
// construction: an invalid one never reaches a worker. Every count and
// duration is bounded (limits.go); an error names the option, the value and
// the range.
type Config struct {
	// Subscriptions to read; no duplicates. Every one is read. At least
	// one subscription or topic is required.
	Subscriptions []model.Subscription

	// Topics to read besides Subscriptions, no duplicates: for each, the
	// prepare step creates a subscription of this read's own, named when
	// the pipeline is built (TopicSubscriptions), so every worker and every
	// resumed split agrees on it. It receives only what is published after
	// the prepare step created it; one that already exists under that name
	// must be on the topic and not another job's, and is read from where it
	// is. A read of a generated name deletes the subscriptions it created
	// once it is done (a bounded read's end, an unbounded one's drain), and
	// only those; a cancelled job's expire a day after their last reader
	// stopped; those of a Name the user gave are kept (docs/reading.md, Reading
	// topics).
	Topics []model.Topic

	// TopicSubscriptions names and configures the subscriptions the read
	// creates for Topics; see TopicSubscriptionOptions.
	TopicSubscriptions TopicSubscriptionOptions

	// Setup holds what the prepare step does for individual subscriptions
	// before any split reads: create one that is missing, seek one to a
	// start position. At most one entry per subscription of Subscriptions;
	// one without an entry must exist and is read from where it is.
	Setup []SubscriptionSetup

	// Ordering is OrderingNone (default) or OrderingPerKey.
	Ordering OrderingMode

	// Splits is how many splits (streaming-pull subscribers) read the
	// subscriptions under OrderingNone: max(len(Subscriptions), Splits),
	// split i reading subscription i mod len(Subscriptions). If zero, 1 is
	// used: one split per subscription. Raise it to spread a busy
	// subscription over workers (one stream carries about 10 MB/s). Under
	// OrderingPerKey it must be 0 or 1.
	Splits int

	// MaxOutstandingMessages and MaxOutstandingBytes are each stream's flow
	// control: Pub/Sub stops sending on a stream while that much of it is
	// unacked, and a message is acked only after its bundle commits. If
	// zero, each stream gets its share of the buffer budget (BufferMaxMessages
	// and BufferMaxBytes over splits x ParallelPullCount), at most
	// DefaultMaxOutstandingMessages (2,000) and DefaultMaxOutstandingBytes
	// (1e9, the client's): a worker running every split is then never sent
	// more than its budget holds, which it would give back for redelivery,
	// spending a delivery attempt each. The 2,000 is twice the client's
	// window, room for two bundles: one waits for its commit while the
	// stream fills the next, so a stream keeps Pub/Sub's pace (BENCHMARKS.md,
	// Saturation). Under CommitFlinkCheckpoint, where acks wait seconds for a
	// checkpoint, the default is the whole share. -1 means no limit. Summed over a worker's splits and
	// streams, keep a value of your own under the budget (Read warns at
	// construction when it may not be); docs/performance.md, Tuning.
	MaxOutstandingMessages int
	MaxOutstandingBytes    int

	// MaxExtension is how long the client keeps extending a held message's
	// lease; it must exceed the time from receipt to commit, or Pub/Sub
	// redelivers. If zero, DefaultMaxExtension (60 min, the client's) is
	// used.
	MaxExtension time.Duration

	// MaxDurationPerAckExtension bounds one lease extension, 10 s to 600 s;
	// it bounds how long a crashed worker's messages wait before
	// redelivery. If zero, the client's adaptive extension is used.
	MaxDurationPerAckExtension time.Duration

	// ParallelPullCount is the number of streaming-pull streams per split.
	// If zero, DefaultParallelPullCount (1, the client's) is used. Under
	// OrderingPerKey it must be 1: a second stream breaks per-key order.
	ParallelPullCount int

	// ShutdownTimeout bounds stopping one split's subscriber; held messages
	// are nacked at once, since waiting would wait for acks only a commit
	// brings. An abandoned shutdown is counted. If zero,
	// DefaultShutdownTimeout (10 s) is used.
	ShutdownTimeout time.Duration

	// MaxRecordsPerBundle caps what one bundle of a split emits. If zero,
	// DefaultMaxRecordsPerBundle (1,000, half a stream's default window, so
	// one bundle fills while the last commits; larger bundles save nothing,
	// BENCHMARKS.md) is used; under CommitFlinkCheckpoint, what the split's
	// streams may hold, since Flink ends a read's bundle only at a
	// checkpoint.
	MaxRecordsPerBundle int

	// BufferMaxMessages and BufferMaxBytes are the hard budget of messages
	// received and not yet emitted, per read per worker process. A delivery
	// that finds it full waits up to 10 s for a bundle to make room, holding
	// the split's streams back; then it is withheld, leased without its
	// payload, and given back for redelivery once a bundle makes room for
	// it, while what is buffered stays for that bundle. A read holds at
	// most twice its budget. If zero, DefaultBufferMaxMessages (40,000:
	// 16 streams' default windows with room to spare) and
	// DefaultBufferMaxBytes (64 MiB) are used; under CommitFlinkCheckpoint
	// DefaultFlinkBufferMaxMessages (200,000) and DefaultFlinkBufferMaxBytes
	// (256 MiB), since there the budget is also the streams' window and a
	// message holds its place until a checkpoint acks it: enough for a
	// stream's pace at checkpoints up to every 5 s (BENCHMARKS.md, Flink).
	// Read warns about a byte budget under three of Pub/Sub's largest
	// messages. docs/performance.md, Tuning.
	BufferMaxMessages int
	BufferMaxBytes    int64

	// LeaseIdle releases a split not polled for this long: its subscriber
	// stops and everything it holds that was not committed goes back to
	// Pub/Sub. This is how a failed or moved bundle gives its messages
	// back. If zero, DefaultLeaseIdle (2 min) is used.
	LeaseIdle time.Duration

	// PollDelay is how long a split waits before polling again after a
	// bundle that found nothing: the latency of the first message after a
	// quiet spell, against an empty bundle per delay. If zero,
	// DefaultPollDelay (100 ms) is used.
	PollDelay time.Duration

	// TimestampAttribute, when set, names the attribute holding each
	// message's event time, as RFC 3339 or Unix milliseconds; messages
	// without it use the publish time. A malformed value is a decode
	// failure (DecodePolicy).
	TimestampAttribute string

	// Format is what every payload must hold: model.FormatBytes (default:
	// anything), model.FormatText (UTF-8) or model.FormatJSON. Checking at
	// the source lets a poison payload follow DecodePolicy before any
	// downstream step chokes on it.
	Format model.Format

	// DecodePolicy is what happens to a message that fails to decode:
	// DecodeFail (default), DecodeDrop, DecodeNack or DecodeDeadLetter.
	// Every decode failure counts in decode_failures.
	DecodePolicy model.DecodePolicy

	// MaxMessages makes the read bounded: it finishes after emitting this
	// many messages from each subscription, shared evenly among its splits.
	// Messages dropped or dead-lettered count (they are consumed); nacked
	// ones do not. A split that cannot reach its share waits: combine with
	// IdleTimeout when the backlog may be smaller. If zero, no count bounds
	// the read.
	MaxMessages int64

	// IdleTimeout makes the read bounded: a split finishes once nothing has
	// arrived for this long, it holds nothing, and its subscription still
	// answers a describe (a vanished subscription or an unreachable Pub/Sub
	// fails the bundle instead of ending the read as if it were drained).
	// A give-back of messages of its subscription by the read in the same
	// process counts as an arrival until they arrive again, and the split
	// waits while another split of its subscription there holds messages:
	// beyond that split's MaxMessages share they are given back when it
	// finishes. If zero, idleness does not end the read.
	IdleTimeout time.Duration

	// WatermarkWindow, WatermarkIdle and WatermarkLateness shape the
	// watermark (watermark.go; docs/event-time.md, Windows and watermarks). While
	// messages arrive, it trails the clock by the largest lag (arrival minus
	// event time) seen within WatermarkWindow plus WatermarkLateness, and
	// never passes a message the read holds or gave back within
	// WatermarkWindow and has not seen again; a split that has received
	// nothing for WatermarkIdle moves to now minus WatermarkLateness. So
	// windows of a caught-up subscription fire about WatermarkLateness
	// after they end, and a message delivered more than WatermarkLateness
	// later than the ones before it is late. If zero,
	// DefaultWatermarkWindow (1 min), DefaultWatermarkIdle (10 s) and
	// DefaultWatermarkLateness (1 s) are used.
	WatermarkWindow   time.Duration
	WatermarkIdle     time.Duration
	WatermarkLateness time.Duration

	// WatermarkMaxOutage bounds how long a split whose streaming pull keeps
	// failing holds the watermark: the client retries such a stream in
	// silence, and without the hold everything published during an outage
	// would arrive late. The hold ends early when the stream answers or the
	// subscription answers a describe (probed once per WatermarkIdle); past
	// the bound the watermark advances again, counted in
	// watermark_outages_released. If zero, DefaultWatermarkMaxOutage (5
	// min) is used. docs/event-time.md, Windows and watermarks.
	WatermarkMaxOutage time.Duration

	// LatePolicy is what happens to a message the read emits behind the
	// watermark it already reported: LateEmit (default) or LateDeadLetter.
	// Either way it counts in late_messages. docs/event-time.md, Late data.
	LatePolicy LatePolicy

	// Finalization: FinalizationAuto (default), FinalizationOn or
	// FinalizationOff. See FinalizationMode.
	Finalization FinalizationMode

	// Commit says when a split acks what a bundle emitted: CommitAuto
	// (default: a completed checkpoint on Flink, the split's next bundle
	// elsewhere), CommitResume or CommitFlinkCheckpoint. See CommitMode;
	// docs/runners.md, Running on Flink.
	Commit CommitMode

	// Flink is where the read learns of completed checkpoints under
	// CommitFlinkCheckpoint: the JobManager's REST address, and the job's
	// name (--job_name if empty).
	Flink FlinkCheckpoints

	// Tracing, when true, gives each message an OpenTelemetry receive span,
	// a child of the trace context its publisher put in its attributes
	// (the Pub/Sub client's tracing does), from its arrival until it is
	// acked, with the time it waited for the runner's commit, or given
	// back. The message carries the span's context on in its attributes,
	// for TraceContext in user code and for a traced Write. Spans go to the
	// global TracerProvider, as the client's do. Default off: no span, no
	// cost. docs/tracing.md, Tracing.
	Tracing bool

	// Backlog says whether the read samples its subscriptions' backlog
	// from Cloud Monitoring, once a minute per subscription per worker:
	// BacklogAuto (default: against production Pub/Sub, and beside an
	// emulator when Connection.MonitoringEndpoint names a stand-in) or
	// BacklogOff. The samples are the splits' progress and size, for
	// runners that scale on them, the backlog gauges, and a hold on the
	// watermark while old messages wait (backlog.go; docs/reading.md,
	// Backlog).
	Backlog BacklogMode

	// Connection says where and as whom to connect. The zero value is
	// application-default credentials against Pub/Sub.
	Connection connection.Settings
}

// bounded reports whether the read ends by itself (MaxMessages or
// IdleTimeout).
func (cfg Config) bounded() bool { return cfg.MaxMessages > 0 || cfg.IdleTimeout > 0 }

// requirements are cfg's settings that every subscription must suit.
func (cfg Config) requirements() prepare.Requirements {
	return prepare.Requirements{
		OrderingPerKey:             cfg.Ordering == OrderingPerKey,
		MaxDurationPerAckExtension: cfg.MaxDurationPerAckExtension,
		DecodePolicy:               cfg.DecodePolicy,
	}
}

// receiveSettings maps the config onto the client's settings for one split.
func (cfg Config) receiveSettings() pubsub.ReceiveSettings {
	return pubsub.ReceiveSettings{
		MaxExtension:               cfg.MaxExtension,
		MaxDurationPerAckExtension: cfg.MaxDurationPerAckExtension,
		MaxOutstandingMessages:     cfg.MaxOutstandingMessages,
		MaxOutstandingBytes:        cfg.MaxOutstandingBytes,
		NumGoroutines:              cfg.ParallelPullCount,
		ShutdownOptions: &pubsub.ShutdownOptions{
			Timeout:  cfg.ShutdownTimeout,
			Behavior: pubsub.ShutdownBehaviorNackImmediately,
		},
	}
}
