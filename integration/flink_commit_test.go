package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	lastErr   error // the latest failed poll's, for reports
}

// watchCheckpoints polls job's checkpoints until ctx ends; the job keeps
// at most ten in its history, so the poll is frequent.
func watchCheckpoints(ctx context.Context, rest *flink.REST, job string) *checkpointLog {
	l := &checkpointLog{completed: map[int64]flink.Checkpoint{}}
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			cps, err := rest.Checkpoints(ctx, job)
			l.mu.Lock()
			l.lastErr = err
			for _, c := range cps.History {
				if c.Status == "COMPLETED" && !c.IsSavepoint {
					l.completed[c.ID] = c
				}
			}
			l.mu.Unlock()
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

// awaitTriggeredAfter waits up to timeout for a completed checkpoint
// triggered after t. The JobManager serves checkpoint statistics from a
// cache that lags by seconds, so only a reading that holds a checkpoint
// begun after t surely holds every checkpoint completed before t.
func (l *checkpointLog) awaitTriggeredAfter(t time.Time, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		var latest int64
		for _, c := range l.completed {
			latest = max(latest, c.TriggerTimestamp)
		}
		err := l.lastErr
		l.mu.Unlock()
		if latest > t.UnixMilli() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no checkpoint triggered after %v completed within %v; the latest was triggered at %v (last poll error: %v)",
				t.Format(time.TimeOnly), timeout, time.UnixMilli(latest).Format(time.TimeOnly), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Read -> tag -> Write (crashpipeline, fused), unbounded, on the embedded
// cluster with a checkpoint every 2 s: every message reaches the output,
// and each is acked only after a checkpoint triggered after its copy was
// published had completed.
func TestFlinkAcksOnlyWhatACheckpointCovers(t *testing.T) {
	t.Parallel()
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

	early, p50 := auditAcks(t, c, reads, cps)
	t.Logf("ACK AUDIT messages=%d checkpoints_completed=%d acked_before_a_covering_checkpoint=%d output_to_ack_p50=%v", n, cps.count(), early, p50)
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait(time.Minute) // a cancelled job's submitter exits with the cancellation
}

// auditAcks checks that c's every input message was acked only after a
// checkpoint triggered after its copy was published had completed, and
// returns how many were acked before one and the median wait from output
// to ack.
func auditAcks(t *testing.T, c *crash.Topology, reads *crash.DeliveryCounter, cps *checkpointLog) (early int, p50 time.Duration) {
	t.Helper()
	published, acked := c.Out.Published(), reads.Acked()
	var lastAck time.Time
	for _, at := range acked {
		if at.After(lastAck) {
			lastAck = at
		}
	}
	if err := cps.awaitTriggeredAfter(lastAck, time.Minute); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var waits []time.Duration
	for _, id := range c.InputIDs() {
		out, ack := published[id], acked[id]
		if _, ok := cps.covering(out, ack); !ok {
			ids = append(ids, id)
			continue
		}
		waits = append(waits, ack.Sub(out))
	}
	slices.Sort(waits)
	if len(ids) > 0 {
		t.Errorf("%d of %d messages were acked before any checkpoint triggered after their output completed, e.g. %v", len(ids), len(c.InputIDs()), ids[:min(5, len(ids))])
	}
	return len(ids), percentileOf(waits, 0.5)
}

// percentileOf is the q quantile of sorted durations, zero for none.
func percentileOf(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))].Round(time.Millisecond)
}

// flinkShapes are the pipelines of the crash matrix, all in one job: the
// read fused with the write, a GroupByKey in 2 s windows between them, and
// a Reshuffle.
var flinkShapes = []string{"fused", "window", "reshuffle"}

// flinkFault is one way a Flink job fails in the crash matrix.
type flinkFault struct {
	name string
	opts flink.Options
	// process runs the pipelines' SDK workers as TaskManager children
	// (PROCESS), so that killing a TaskManager kills them too.
	process bool
	// extra are crashpipeline flags.
	extra []string
	// inject makes the fault happen to the job running in p, and returns
	// the submitter of the job that carries on (p, or a new one).
	inject func(t *testing.T, f *flink.Flink, p *crash.Process, job flink.Job, resubmit func() *crash.Process) *crash.Process
}

var flinkFaults = []flinkFault{
	{
		// Flink restores the job from its last checkpoint on the other
		// TaskManager by itself.
		name:    "taskmanager-killed",
		opts:    flink.Options{Session: true, CheckpointInterval: 2 * time.Second},
		process: true,
		inject: func(t *testing.T, f *flink.Flink, p *crash.Process, _ flink.Job, _ func() *crash.Process) *crash.Process {
			tm := busyTaskManager(t, f)
			if err := f.KillTaskManager(tm); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed TaskManager %d and its SDK workers", tm)
			return p
		},
	},
	{
		// The job server (and its embedded cluster) dies with the job; the
		// pipeline is resubmitted from the last retained checkpoint by a
		// new process.
		name: "jobserver-killed",
		opts: flink.Options{CheckpointInterval: 2 * time.Second, RetainCheckpoints: true},
		inject: func(t *testing.T, f *flink.Flink, p *crash.Process, job flink.Job, resubmit func() *crash.Process) *crash.Process {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cps, err := f.REST.Checkpoints(ctx, job.ID)
			if err != nil || cps.Latest.Completed == nil {
				t.Fatalf("no completed checkpoint to restore (%v)", err)
			}
			if err := f.KillJobServer(); err != nil {
				t.Fatal(err)
			}
			p.Kill() // the submitter is the SDK worker: it dies with the job
			// The last checkpoint on disk: the one the REST API reported may
			// have been replaced, and deleted, since.
			retained, id, err := f.RetainedCheckpoint(job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.SetRestore(retained); err != nil {
				t.Fatal(err)
			}
			if err := f.StartJobServer(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed the job server and the submitter; restarting from checkpoint %d", id)
			return resubmit()
		},
	},
	{
		// The transform fails one bundle: Flink fails the job's tasks and
		// restores them from the last checkpoint, in the same SDK worker.
		name:  "failed-bundle",
		opts:  flink.Options{CheckpointInterval: 2 * time.Second},
		extra: []string{"--fail_after=1500"},
		inject: func(t *testing.T, _ *flink.Flink, p *crash.Process, _ flink.Job, _ func() *crash.Process) *crash.Process {
			return p // --fail_after fails the job by itself
		},
	},
}

// busyTaskManager is the TaskManager that started the job's SDK workers.
func busyTaskManager(t *testing.T, f *flink.Flink) int {
	for i := range 2 {
		if strings.Contains(f.Log(fmt.Sprintf("taskmanager-%d", i), 4<<20), "Attempting to start process with command") {
			return i
		}
	}
	t.Fatal("no TaskManager started an SDK worker")
	return -1
}

// The crash matrix: each fault hits a job of three shapes reading 1,500
// messages each, with checkpoints every 2 s, after a checkpoint completed
// and while messages flow; then the job (restored by Flink, or
// resubmitted) runs on until every input message is on its output. No
// message may be lost; the duplicates are counted: what the read emitted
// after the checkpoint it resumed from, and which had reached the output,
// comes again. The windows allow 30 minutes of lateness: the messages the
// failed worker held come back minutes later (the emulator strands them),
// behind a watermark the restored job has moved on (docs/runners.md, Running on
// Flink). The faults run side by side: most of their time is that wait.
func TestFlinkCrashMatrix(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	bin := crash.BuildPipeline(t)
	boot := crash.Build(t, bootPackage, "boot")
	for _, fault := range flinkFaults {
		t.Run(fault.name, func(t *testing.T) {
			t.Parallel()
			f := flink.Start(t, fault.opts)
			const n = 1500
			var cs []*crash.Topology
			for _, shape := range flinkShapes {
				cs = append(cs, crash.NewTopology(t, e, "fc-"+shape, n, nil))
			}
			runner := f.RunnerArgs
			if fault.process {
				runner = func() []string { return processArgs(t, f, boot, bin) }
			}
			extra := append([]string{"--allowed_lateness=30m"}, fault.extra...)
			submit := func() *crash.Process {
				return crash.Start(t, bin, "submitter", append(runner(), crash.ArgsFor(cs, flinkShapes, extra...)...)...)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			start := time.Now()
			p := submit()
			job, err := f.REST.AwaitRunningJob(ctx)
			if err != nil {
				t.Fatalf("%v\nsubmitter stderr:\n%s", err, crash.Tail(p.Stderr(), 3000))
			}
			if got := cs[0].Out.AwaitDistinct(n/3, 3*time.Minute); got < n/3 {
				t.Fatalf("%d of %d fused outputs before the fault; submitter stderr:\n%s", got, n, crash.Tail(p.Stderr(), 3000))
			}
			awaitCompletedCheckpoint(ctx, t, f, job.ID, 2)
			p = fault.inject(t, f, p, job, submit)
			after, err := f.REST.AwaitRunningJob(ctx)
			if err != nil {
				t.Fatalf("no job runs after the fault: %v\nsubmitter stderr:\n%s", err, crash.Tail(p.Stderr(), 3000))
			}
			restored := awaitRestore(ctx, t, f, after.ID)
			t.Logf("the job runs on from checkpoint %d", restored)
			for i, c := range cs {
				missing := c.Lost(t, 6*time.Minute, "flink-"+fault.name+"-"+flinkShapes[i], 0, 1, 0, time.Since(start))
				if len(missing) > 0 {
					t.Errorf("%s: %d of %d messages never reached the output, e.g. %v", flinkShapes[i], len(missing), n, missing[:min(5, len(missing))])
				}
			}
			if err := f.REST.Cancel(ctx, after.ID); err != nil {
				t.Error(err)
			}
			_ = p.Wait(time.Minute)
		})
	}
}

// awaitCompletedCheckpoint waits until job has completed n checkpoints.
func awaitCompletedCheckpoint(ctx context.Context, t *testing.T, f *flink.Flink, job string, n int) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if cps, err := f.REST.Checkpoints(ctx, job); err == nil && cps.Counts.Completed >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no checkpoint completed")
		case <-tick.C:
		}
	}
}

// awaitRestore waits until job reports a restored checkpoint, and returns
// its ID: the fault happened and Flink recovered from it.
func awaitRestore(ctx context.Context, t *testing.T, f *flink.Flink, job string) int64 {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if cps, err := f.REST.Checkpoints(ctx, job); err == nil && cps.Latest.Restored != nil {
			return cps.Latest.Restored.ID
		}
		select {
		case <-ctx.Done():
			t.Fatal("the job never restored a checkpoint: the fault did not happen, or Flink did not recover from it")
		case <-tick.C:
		}
	}
}
