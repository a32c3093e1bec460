package source

import "time"

// OrderingMode says whether the read preserves per-ordering-key order.
type OrderingMode string

const (
	// OrderingNone makes no ordering guarantee and is tuned for throughput:
	// several splits may read one subscription.
	OrderingNone OrderingMode = "NONE"
	// OrderingPerKey emits each subscription's messages in order per ordering
	// key. It reads each subscription through exactly one split and one
	// streaming-pull connection, because Pub/Sub serializes a key's
	// deliveries only within one connection. It needs subscriptions with
	// message ordering enabled. Downstream, key by Message.OrderingKey to keep
	// the order.
	OrderingPerKey OrderingMode = "PER_KEY"
)

// FinalizationMode decides whether the read asks the runner for bundle
// finalization callbacks. Acks never depend on them (the next bundle of a
// split acks what the committed bundle emitted); when delivered they only
// ack sooner.
type FinalizationMode string

const (
	// FinalizationAuto uses finalization unless the SDK compiled into the
	// binary is a version known to lose finalization callbacks (Beam Go
	// 2.77.0 and earlier), and stops using it in a process where a runtime
	// check sees a callback never delivered.
	FinalizationAuto FinalizationMode = "AUTO"
	// FinalizationOn always asks for finalization (still with the runtime
	// check). For users on an SDK patched against the defect.
	FinalizationOn FinalizationMode = "ON"
	// FinalizationOff never asks for finalization.
	FinalizationOff FinalizationMode = "OFF"
)

// LatePolicy says what happens to a message the read would emit behind the
// watermark it already reported: downstream, a window that has fired drops
// it (on Prism without a word), unless the pipeline allows lateness. Every
// such message counts in late_messages, whatever the policy.
type LatePolicy string

const (
	// LateEmit (default) emits it at its event time, as Beam's other
	// Pub/Sub readers do; a window with allowed lateness still counts it.
	LateEmit LatePolicy = "EMIT"
	// LateDeadLetter emits it as a dlq.FailedMessage (stage late, the
	// event time and the watermark in Error) on the read's dead-letter
	// output, at the watermark so that it is not late there, and acks it
	// with its bundle. Only ReadWithDeadLetters returns that output.
	LateDeadLetter LatePolicy = "DEAD_LETTER"
)

// CommitMode says when a split acks what a bundle emitted: once the runner
// has made the bundle's output durable, which runners signal differently
// (internal/commit).
type CommitMode string

const (
	// CommitAuto (default) is CommitFlinkCheckpoint when the pipeline runs
	// with --runner=flink and CommitResume otherwise.
	CommitAuto CommitMode = "AUTO"
	// CommitResume acks a bundle's messages when the split's next bundle
	// starts: Prism and Dataflow persist a residual only with the output of
	// the bundle that produced it. On Flink it is safe only for a read
	// fused with the transforms that end its messages' way (a Write right
	// behind it): Flink runs the next bundle at once, and what a shuffle
	// holds is durable only at a checkpoint.
	CommitResume CommitMode = "RESUME"
	// CommitFlinkCheckpoint acks a bundle's messages once a Flink checkpoint
	// triggered after the split's next bundle started has completed, as the
	// JobManager's REST API reports (Config.Flink); until then they stay
	// leased. When the job finishes bundles before checkpoints
	// (finishBundleBeforeCheckpointing), one triggered after the bundle
	// itself started suffices. The job must checkpoint.
	CommitFlinkCheckpoint CommitMode = "FLINK_CHECKPOINT"
)

// FlinkCheckpoints is where a read under CommitFlinkCheckpoint learns of
// its job's completed checkpoints.
type FlinkCheckpoints struct {
	// REST is host:port of the JobManager's REST API (Flink's rest.address
	// and rest.port), as the workers reach it. Required under
	// CommitFlinkCheckpoint.
	REST string
	// Job is the Beam job's name, by which the read finds its Flink job
	// (Beam's Flink runner names it after the job). If empty, --job_name is
	// used; one of them must be set, and unique among the cluster's running
	// jobs.
	Job string
	// Patience is how long acks wait for the REST API to answer: a failed
	// request (a JobManager electing its leader answers 503) only delays
	// them, and past Patience without one successful poll every bundle
	// fails, saying what it asked and what it got. If zero,
	// DefaultFlinkPatience (10 min) is used. docs/runners.md, Running on
	// Flink.
	Patience time.Duration
}

// BacklogMode says whether the read samples its subscriptions' backlog.
type BacklogMode string

const (
	// BacklogAuto samples against production Pub/Sub, and beside an
	// emulator when Connection.MonitoringEndpoint names a Cloud Monitoring
	// stand-in.
	BacklogAuto BacklogMode = "AUTO"
	// BacklogOff never samples: progress reports one unit of work remaining
	// and the watermark is estimated from arrivals alone.
	BacklogOff BacklogMode = "OFF"
)
