package integration

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
)

// The read's commit on Flink: with checkpoints on, a message is acked only
// once a checkpoint that began after its output existed has completed
// (CommitFlinkCheckpoint, the default with --runner=flink). The audit
// records, through a proxy in front of the emulator, when the read acked
// each message, reads when its copy was published to the output, and
// polls the JobManager for every completed checkpoint.

// checkpointLog is every completed checkpoint of a job, polled from the
// JobManager's REST API while a test runs.
type checkpointLog struct {
	mu        sync.Mutex
	completed map[int64]flink.Checkpoint
}

// watchCheckpoints polls job's checkpoints until ctx ends; the job keeps
// at most ten in its history, so the poll is frequent.
func watchCheckpoints(ctx context.Context, rest *flink.REST, job string) *checkpointLog {
	l := &checkpointLog{completed: map[int64]flink.Checkpoint{}}
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if cps, err := rest.Checkpoints(ctx, job); err == nil {
				l.mu.Lock()
				for _, c := range cps.History {
					if c.Status == "COMPLETED" && !c.IsSavepoint {
						l.completed[c.ID] = c
					}
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

// covering returns the first checkpoint triggered after t that had
// completed by at, and whether there is one.
func (l *checkpointLog) covering(t, at time.Time) (flink.Checkpoint, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best flink.Checkpoint
	found := false
	for _, c := range l.completed {
		if c.TriggerTimestamp > t.UnixMilli() && c.LatestAck <= at.UnixMilli() && (!found || c.TriggerTimestamp < best.TriggerTimestamp) {
			best, found = c, true
		}
	}
	return best, found
}

func (l *checkpointLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.completed)
}

// Read -> tag -> Write (crashpipeline, fused), unbounded, on the embedded
// cluster with a checkpoint every 2 s: every message reaches the output,
// and each is acked only after a checkpoint triggered after its copy was
// published had completed.
func TestFlinkAcksOnlyWhatACheckpointCovers(t *testing.T) {
	e := emulator.Require(t)
	bin := crash.BuildPipeline(t)
	f := flink.Start(t, flink.Options{CheckpointInterval: 2 * time.Second})
	reads := crash.StartDeliveryCounter(t, e.Endpoint)
	const n = 600
	c := crash.NewTopology(t, e, "flink-audit", n, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	p := crash.Start(t, bin, "submitter", append(f.RunnerArgs(), c.Args("--read_emulator="+reads.Endpoint)...)...)
	job, err := f.REST.AwaitRunningJob(ctx)
	if err != nil {
		t.Fatalf("%v\nsubmitter stderr:\n%s", err, crash.Tail(p.Stderr(), 3000))
	}
	cps := watchCheckpoints(ctx, f.REST, job.ID)
	if got := c.Out.AwaitDistinct(n, 3*time.Minute); got < n {
		t.Fatalf("%d of %d messages on the output; submitter stderr:\n%s", got, n, crash.Tail(p.Stderr(), 3000))
	}
	if got := reads.AwaitAcked(n, 2*time.Minute); got < n {
		t.Fatalf("%d of %d messages acked after %d checkpoints; job server log:\n%s", got, n, cps.count(), f.Log("jobserver", 4000))
	}

	published, acked := c.Out.Published(), reads.Acked()
	var early []string
	var waits []time.Duration
	for _, id := range c.InputIDs() {
		out, ack := published[id], acked[id]
		if _, ok := cps.covering(out, ack); !ok {
			early = append(early, id)
			continue
		}
		waits = append(waits, ack.Sub(out))
	}
	slices.Sort(waits)
	t.Logf("ACK AUDIT messages=%d acked=%d checkpoints_completed=%d acked_before_a_covering_checkpoint=%d output_to_ack_p50=%v max=%v",
		n, len(acked), cps.count(), len(early), percentileOf(waits, 0.5), percentileOf(waits, 1))
	if len(early) > 0 {
		t.Errorf("%d of %d messages were acked before any checkpoint triggered after their output completed, e.g. %v", len(early), n, early[:min(5, len(early))])
	}
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait(time.Minute) // a cancelled job's submitter exits with the cancellation
}

// percentileOf is the q quantile of sorted durations, zero for none.
func percentileOf(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))].Round(time.Millisecond)
}
