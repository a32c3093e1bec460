package source

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

func init() {
	register.Function2x0(nothing)
	register.Function2x1(sum)
	register.Emitter1[int64]()
	register.DoFn2x0[context.Context, int64](&deleteOwnedFn{})
	register.DoFn2x0[context.Context, int64](&drainFlinkJobFn{})
}

// What runs once a read's output is complete (whenDone): the deletion of
// the subscriptions a read of a generated name created for its topics,
// and the drain that ends a bounded read's Flink job.

// whenDone returns a PCollection of a single zero that exists only once
// msgs, a read's output, is complete: the zero is grouped in the global
// window with what the read emits (which adds nothing to it), so the
// grouping fires once the read's watermark reaches its end, when every
// split finished. A split finishes after its last, ack-only bundle (the
// one a drain's TruncateRestriction leaves too), so whatever follows runs
// once every ack was sent. The grouping holds one element, however long
// an unbounded read runs.
func whenDone(s beam.Scope, msgs beam.PCollection) beam.PCollection {
	none := beam.ParDo(s, nothing, msgs)
	return beam.Combine(s, sum, beam.Flatten(s, none, beam.Create(s, int64(0))))
}

// nothing emits nothing for a message: the read's output only holds what
// follows whenDone back until it is complete.
func nothing(model.Message, func(int64)) {}

func sum(a, b int64) int64 { return a + b }

// deleteWhenDone adds to a read of a generated TopicSubscriptions.Name the
// step that deletes the subscriptions it created for its topics, once the
// read is done (whenDone): a bounded read once it finished, an unbounded
// one once a drain ended it. So nothing is deleted while a split still has
// acks to send, and a cancelled job deletes nothing: its subscriptions
// expire after their TTL.
func deleteWhenDone(s beam.Scope, p readPlan, msgs beam.PCollection) {
	s = s.Scope("DeleteTopicSubscriptions")
	beam.ParDo0(s, &deleteOwnedFn{Owned: p.Owned, Connection: p.Cfg.Connection}, whenDone(s, msgs))
}

// deleteOwnedFn deletes a finished read's own subscriptions
// (prepare.DeleteOwned).
type deleteOwnedFn struct {
	Owned      prepare.Owned
	Connection connection.Settings
}

func (fn *deleteOwnedFn) ProcessElement(ctx context.Context, _ int64) {
	adm, err := newAdmin(ctx, fn.Owned.Subscriptions[0].Project, fn.Connection)
	if err != nil {
		prepare.NoneDeleted(ctx, fn.Owned, err)
		return
	}
	defer closeAdmin(ctx, adm, "the client that deleted the read's subscriptions")
	prepare.DeleteOwned(ctx, adm, fn.Owned)
}

// drainPollInterval is how often the drain asks the REST API whether only
// the job's sources still run.
const drainPollInterval = 2 * time.Second

// drainWhenDone adds to a bounded read under CommitFlinkCheckpoint the
// step that ends its Flink job once the read is done (whenDone), every ack
// sent: Beam's Flink runner keeps a checkpointing job's sources running,
// so the job would otherwise never end (flinkjob.Drain).
func drainWhenDone(s beam.Scope, cfg Config, msgs beam.PCollection) {
	s = s.Scope("DrainFlinkJob")
	beam.ParDo0(s, &drainFlinkJobFn{Flink: cfg.Flink}, whenDone(s, msgs))
}

// drainFlinkJobFn drains the job of a finished read.
type drainFlinkJobFn struct {
	Flink FlinkCheckpoints
}

// ProcessElement starts the drain in the background and returns: the
// drain waits for the job's other stages, whose checkpoints this bundle
// would hold back. It ends with the job, or past Patience without an
// answer from the REST API.
func (fn *drainFlinkJobFn) ProcessElement(ctx context.Context, _ int64) {
	job := flinkjob.NameOf(fn.Flink.Job)
	done := flinkjob.DrainOnce(fn.Flink.REST, job, drainPollInterval, fn.Flink.Patience)
	if done == nil {
		return
	}
	log.Infof(ctx, "pubsubio.Read: the read is done; its Flink job %q ends with a drain once only its sources run", job)
	go func() {
		ctx := context.Background()
		if err := <-done; err != nil {
			log.Errorf(ctx, "pubsubio.Read: the read is done, but its Flink job did not end: %v; cancel it (every message it read was acked)", err)
			return
		}
		log.Infof(ctx, "pubsubio.Read: drained the Flink job %q", job)
	}()
}
