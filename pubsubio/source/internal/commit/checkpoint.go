package commit

import (
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob"
)

// Checkpoint acks what bundle N emitted once a Flink checkpoint triggered
// after bundle N+1 began has completed: N's output and residual left the
// task before N+1 began, so that checkpoint holds them. When the job
// finishes bundles before checkpoints (Beam's
// finishBundleBeforeCheckpointing, as the JobManager answers) and N ran in
// this process, a checkpoint triggered after N began suffices: its barrier
// reached the task after N began, and the task finished N before its
// snapshot. That saves a checkpoint interval of publish to ack. A
// process-wide watcher of the job reads the checkpoints from the
// JobManager's REST API (internal/flinkjob); coverage is decided on the
// JobManager's clock.
//
// A restore rolls back what bundles emitted after the restored
// checkpoint. When it happens in this process, the split sees a Seq again:
// the bundles before it are durable (the restored checkpoint holds their
// successor), the rest were rolled back and the retry emits them again.
// Whatever else waited from before a restore is void: given back, for
// Pub/Sub to redeliver.
type Checkpoint struct {
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
	Batch
	stamp flinkjob.Stamp
}

// NewCheckpoint watches the Flink job that Beam's Flink runner submitted
// for the Beam job named beamJob, through the REST API at rest. A bundle
// fails once the API has not answered for patience. settled is called,
// without locks, whenever a checkpoint completes.
func NewCheckpoint(rest, beamJob string, patience time.Duration, settled func()) *Checkpoint {
	w := flinkjob.Watch(rest, flinkjob.NameOf(beamJob), flinkjob.Options{})
	return &Checkpoint{watcher: w, patience: patience, lastBegun: -1, unsubscribe: w.Subscribe(settled)}
}

// Begin stamps before with a mark of now (or of when it began, see
// Checkpoint), or, when seq was begun already, takes it as restored.
func (g *Checkpoint) Begin(seq int64, before Batch) (Cleared, error) {
	var c Cleared
	if seq <= g.lastBegun {
		// Restored from a checkpoint holding seq's restriction.
		for _, a := range g.awaiting {
			if a.Seq < seq {
				c.Ack = append(c.Ack, a.Batch)
			}
		}
		g.awaiting = nil
		if len(before.IDs) > 0 {
			c.Ack = append(c.Ack, before)
		}
	} else if len(before.IDs) > 0 {
		stamp := g.watcher.Mark()
		if before.Local && before.Seq == g.lastBegun && g.watcher.FinishesBundles() {
			stamp = g.began
		}
		g.awaiting = append(g.awaiting, awaitingCommit{Batch: before, stamp: stamp})
	}
	g.lastBegun, g.began = seq, g.watcher.Mark()
	if err := g.watcher.Err(g.patience); err != nil {
		return c, err
	}
	return g.judge(c, true), nil
}

// Settle acks what a completed checkpoint covers.
func (g *Checkpoint) Settle() Cleared { return g.judge(Cleared{}, false) }

// Finalized acks only what a checkpoint covers: Beam's Flink runner
// finalizes every bundle finished so far when a checkpoint completes,
// including those that ended after its barrier.
func (g *Checkpoint) Finalized(Batch) Cleared { return g.Settle() }

// judge adds to c what a checkpoint covers and, if giveBack, what is void.
func (g *Checkpoint) judge(c Cleared, giveBack bool) Cleared {
	kept := g.awaiting[:0]
	for _, a := range g.awaiting {
		switch g.watcher.Judge(a.stamp) {
		case flinkjob.Covered:
			c.Ack = append(c.Ack, a.Batch)
		case flinkjob.Void:
			if giveBack {
				c.Void = append(c.Void, a.Batch)
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

// Waiting reports whether a batch waits for a checkpoint.
func (g *Checkpoint) Waiting() bool { return len(g.awaiting) > 0 }

// Release stops watching the job.
func (g *Checkpoint) Release() {
	g.unsubscribe()
	g.watcher.Release()
}
