package source

import (
	"strings"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob"
)

// flinkGate acks what bundle N emitted once a checkpoint triggered after
// bundle N+1 began has completed: N's output and residual left the task
// before N+1 began, so that checkpoint holds them. When the job finishes
// bundles before checkpoints (Beam's finishBundleBeforeCheckpointing, as
// the JobManager answers) and N began in this process, a checkpoint
// triggered after N began suffices: its barrier reached the task after N
// began, and the task finished N before its snapshot. That saves a
// checkpoint interval of publish to ack. A process-wide watcher of the job
// reads the checkpoints from the JobManager's REST API
// (internal/flinkjob); coverage is decided on the JobManager's clock.
//
// A restore rolls back what bundles emitted after the restored
// checkpoint. When it happens in this process, the split sees a Seq again:
// the bundles before it are durable (the restored checkpoint holds their
// successor), the rest were rolled back and the retry emits them again
// (requeue.go). Whatever else waited from before a restore is void: given
// back, for Pub/Sub to redeliver.
type flinkGate struct {
	watcher     *flinkjob.Watcher
	patience    time.Duration
	unsubscribe func()

	lastBegun int64          // the highest Seq begun in this process, -1 before any
	began     flinkjob.Stamp // when lastBegun began
	awaiting  []awaitingCommit
}

// awaitingCommit is what one bundle emitted, waiting for a checkpoint:
// stamp marks when its successor, or the bundle itself, began.
type awaitingCommit struct {
	emittedBatch
	stamp flinkjob.Stamp
}

// newFlinkGate watches the job of cfg.Flink; settled is called, without
// locks, whenever a checkpoint completes.
func newFlinkGate(cfg FlinkCheckpoints, settled func()) *flinkGate {
	w := flinkjob.Watch(cfg.REST, flinkJobName(cfg.Job), flinkjob.Options{})
	return &flinkGate{watcher: w, patience: cfg.Patience, lastBegun: -1, unsubscribe: w.Subscribe(settled)}
}

func (g *flinkGate) begin(rest Restriction) (cleared, error) {
	var c cleared
	if rest.Seq <= g.lastBegun {
		// Restored from a checkpoint holding rest.
		for _, a := range g.awaiting {
			if a.seq < rest.Seq {
				c.ack = append(c.ack, a.emittedBatch)
			}
		}
		g.awaiting = nil
		if len(rest.AckIDs) > 0 {
			c.ack = append(c.ack, emittedBefore(rest))
		}
	} else if len(rest.AckIDs) > 0 {
		emitted := emittedBefore(rest)
		stamp := g.watcher.Mark()
		if emitted.owner == processID && emitted.seq == g.lastBegun && g.watcher.FinishesBundles() {
			stamp = g.began
		}
		g.awaiting = append(g.awaiting, awaitingCommit{emittedBatch: emitted, stamp: stamp})
	}
	g.lastBegun, g.began = rest.Seq, g.watcher.Mark()
	if err := g.watcher.Err(g.patience); err != nil {
		return c, err
	}
	return g.judge(c, true), nil
}

func (g *flinkGate) settle() cleared { return g.judge(cleared{}, false) }

// finalized acks only what a checkpoint covers: Beam's Flink runner
// finalizes every bundle finished so far when a checkpoint completes,
// including those that ended after its barrier.
func (g *flinkGate) finalized(emittedBatch) cleared { return g.settle() }

// judge adds to c what a checkpoint covers and, if giveBack, what is void.
func (g *flinkGate) judge(c cleared, giveBack bool) cleared {
	kept := g.awaiting[:0]
	for _, a := range g.awaiting {
		switch g.watcher.Judge(a.stamp) {
		case flinkjob.Covered:
			c.ack = append(c.ack, a.emittedBatch)
		case flinkjob.Void:
			if giveBack {
				c.void = append(c.void, a.emittedBatch)
				continue
			}
			kept = append(kept, a) // a retry of its bundle may still come
		default:
			kept = append(kept, a)
		}
	}
	clear(g.awaiting[len(kept):])
	g.awaiting = kept
	return c
}

func (g *flinkGate) waiting() bool { return len(g.awaiting) > 0 }
func (g *flinkGate) acks() counter { return acksCheckpoint }

func (g *flinkGate) release() {
	g.unsubscribe()
	g.watcher.Release()
}

// flinkJobName is how Beam's Flink runner starts the name of the Flink job
// it submits for a Beam job named name (JobNameFactory: lower case, every
// character but a-z and 0-9 turned into 0; then -user-date-random).
func flinkJobName(name string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			return c
		}
		return '0'
	}, strings.ToLower(name))
}
