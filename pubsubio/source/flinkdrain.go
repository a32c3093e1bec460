package source

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob"
)

func init() {
	register.DoFn2x0[context.Context, int64](&drainFlinkJobFn{})
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
