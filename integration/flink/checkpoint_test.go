package flink

import (
	"context"
	"flag"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	beamflink "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
)

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	os.Exit(m.Run())
}

// tickFn is the smallest unbounded splittable DoFn: every ProcessElement
// emits one element and asks to resume after Resume, until stopTicks.
// It has nothing of pubsubio, so what it shows is Beam's and Flink's.
type tickFn struct {
	Resume time.Duration
}

// Process-wide, because with LOOPBACK this test process is the worker.
var (
	tickCalls atomic.Int64
	stopTicks atomic.Bool
	// firstPos is the position of the first element emitted since the last
	// reset (-1: none yet), maxPos the highest emitted.
	firstPos atomic.Int64
	maxPos   atomic.Int64
)

func resetTicks() {
	tickCalls.Store(0)
	stopTicks.Store(false)
	firstPos.Store(-1)
	maxPos.Store(-1)
}

func (fn *tickFn) CreateInitialRestriction(int) offsetrange.Restriction {
	return offsetrange.Restriction{Start: 0, End: math.MaxInt64}
}

func (fn *tickFn) SplitRestriction(_ int, r offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{r}
}

func (fn *tickFn) RestrictionSize(int, offsetrange.Restriction) float64 { return 1 }

func (fn *tickFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(r))
}

func (fn *tickFn) ProcessElement(rt *sdf.LockRTracker, _ int, emit func(int64)) sdf.ProcessContinuation {
	tickCalls.Add(1)
	pos := rt.GetRestriction().(offsetrange.Restriction).Start
	if stopTicks.Load() || !rt.TryClaim(pos) {
		return sdf.StopProcessing()
	}
	firstPos.CompareAndSwap(-1, pos)
	for {
		m := maxPos.Load()
		if pos <= m || maxPos.CompareAndSwap(m, pos) {
			break
		}
	}
	emit(pos)
	return sdf.ResumeProcessingIn(fn.Resume)
}

func discard(int64) {}

func init() {
	register.DoFn3x1[*sdf.LockRTracker, int, func(int64), sdf.ProcessContinuation](&tickFn{})
	register.Emitter1[int64]()
	register.Function1x0(discard)
}

// submitTicks runs a tick pipeline of two splits on f in the background
// and waits until its DoFn runs; ran gets Execute's error once the job
// ends.
func submitTicks(ctx context.Context, t *testing.T, f *Flink) (Job, <-chan error) {
	t.Helper()
	*jobopts.Endpoint = f.Endpoint
	*jobopts.EnvironmentType = "LOOPBACK"
	resetTicks()
	p, s := beam.NewPipelineWithRoot()
	ticks := beam.ParDo(s, &tickFn{Resume: time.Second}, beam.CreateList(s, []int{0, 1}))
	beam.ParDo0(s, discard, ticks)
	ran := make(chan error, 1)
	go func() {
		_, err := beamflink.Execute(ctx, p)
		ran <- err
	}()
	job, err := f.REST.AwaitRunningJob(ctx)
	if err != nil {
		t.Fatalf("%v\n--- job server log ---\n%s", err, f.Log("jobserver", 8000))
	}
	// Deploying the tasks and starting their SDK harnesses takes 5 to 30 s
	// on a loaded 2-core machine.
	for tickCalls.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("the DoFn never ran\n--- job server log ---\n%s", f.Log("jobserver", 8000))
		case err := <-ran:
			t.Fatalf("the job ended before the DoFn ran: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return job, ran
}

// TestCheckpointsWhileSDFRuns: with checkpoints turned on as pipeline
// options (through the proxy), checkpoints complete every interval while a
// splittable DoFn runs, into file-system storage under CheckpointDir, and
// the DoFn resumes at its requested pace rather than in a busy loop; on the
// embedded cluster (integration's crash matrix checkpoints on the session
// cluster).
func TestCheckpointsWhileSDFRuns(t *testing.T) {
	const interval = time.Second
	f := Start(t, Options{CheckpointInterval: interval, RetainCheckpoints: true})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	job, ran := submitTicks(ctx, t, f)
	defer stopTicks.Store(true)
	before, err := f.REST.Checkpoints(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	calls0, start := tickCalls.Load(), time.Now()
	const watch = 10 * time.Second
	time.Sleep(watch)
	after, err := f.REST.Checkpoints(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	calls := tickCalls.Load() - calls0
	rate := float64(calls) / time.Since(start).Seconds()
	completed := after.Counts.Completed - before.Counts.Completed
	t.Logf("in %v while the DoFn ran: %d checkpoints completed (%d failed), %d ProcessElement calls (%.1f/s over 2 splits resuming every 1 s)",
		watch, completed, after.Counts.Failed-before.Counts.Failed, calls, rate)
	if want := int(watch/interval) / 2; completed < want {
		t.Errorf("%d checkpoints completed in %v at a %v interval, want at least %d", completed, watch, interval, want)
	}
	if rate > 10 {
		t.Errorf("ProcessElement ran %.0f times a second; each of 2 splits asked to resume in 1 s", rate)
	}
	if calls == 0 {
		t.Errorf("the DoFn stopped running")
	}

	cfg, err := f.REST.CheckpointConfig(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint config: %+v", cfg)
	if cfg.CheckpointStorage != "FileSystemCheckpointStorage" || cfg.StateBackend != "HashMapStateBackend" ||
		cfg.Interval != interval.Milliseconds() || !cfg.Externalization.Enabled || cfg.Externalization.DeleteOnCancellation {
		t.Errorf("checkpoint config %+v: want FileSystemCheckpointStorage, HashMapStateBackend, %v, retained on cancellation", cfg, interval)
	}
	latest := after.Latest.Completed
	if latest == nil {
		t.Fatal("no completed checkpoint")
	}
	if path := strings.TrimPrefix(latest.ExternalPath, "file:"); !strings.HasPrefix(path, f.CheckpointDir) {
		t.Errorf("latest checkpoint at %q, want it under %s", latest.ExternalPath, f.CheckpointDir)
	}

	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ran:
		// A job with checkpoints on never ends by itself; cancelled, Beam Go
		// reports it failed.
		if err == nil || !strings.Contains(err.Error(), "cancel") {
			t.Errorf("the cancelled job returned %v, want a cancellation", err)
		}
	case <-ctx.Done():
		t.Fatal("the cancelled job did not end")
	}
	if _, id := retainedCheckpoint(t, f, job.ID); id < latest.ID {
		t.Errorf("after the cancel the job's last retained checkpoint is %d, want %d or later", id, latest.ID)
	}
}

// retainedCheckpoint is f.RetainedCheckpoint, failing the test on an
// error.
func retainedCheckpoint(t *testing.T, f *Flink, jobID string) (string, int64) {
	t.Helper()
	path, id, err := f.RetainedCheckpoint(jobID)
	if err != nil {
		t.Fatal(err)
	}
	return path, id
}

// TestRestore: a job is ended abruptly or cancelled, and the pipeline
// resubmitted with Restore set to its last retained checkpoint runs from
// it: the JobManager reports the restore, and the DoFn resumes past where
// it was (its offset restrictions restored), not from 0. Embedded: the job
// server, and the job in it, is SIGKILLed and started again. Session: the
// job is cancelled (a killed job server would leave it running on the
// cluster), and Restore reaches the job as the savepointPath option.
func TestRestore(t *testing.T) {
	for _, session := range []bool{false, true} {
		name := "embedded"
		if session {
			name = "session"
		}
		t.Run(name, func(t *testing.T) { restore(t, session) })
	}
}

func restore(t *testing.T, session bool) {
	f := Start(t, Options{Session: session, CheckpointInterval: time.Second, RetainCheckpoints: true})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	job, ran := submitTicks(ctx, t, f)
	var latest *Checkpoint
	for latest == nil || latest.ID < 3 {
		cps, err := f.REST.Checkpoints(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		latest = cps.Latest.Completed
		time.Sleep(200 * time.Millisecond)
	}
	// The end lands after the checkpoint restored below: what the DoFn
	// emitted since is what a restore replays.
	if session {
		if err := f.REST.Cancel(ctx, job.ID); err != nil {
			t.Fatal(err)
		}
	} else if err := f.KillJobServer(); err != nil {
		t.Fatal(err)
	}
	endedAt := maxPos.Load()
	select {
	case err := <-ran:
		t.Logf("the submitter saw the job end: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the submitter did not notice the job's end")
	}
	retained, id := retainedCheckpoint(t, f, job.ID)
	t.Logf("job ended with the DoFn at position %d; restoring checkpoint %d (%s)", endedAt, id, retained)

	if err := f.SetRestore(retained); err != nil {
		t.Fatal(err)
	}
	if !session {
		start := time.Now()
		if err := f.StartJobServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("job server restarted in %v", time.Since(start).Round(time.Millisecond))
	}
	job2, ran2 := submitTicks(ctx, t, f)
	defer func() {
		stopTicks.Store(true)
		_ = f.REST.Cancel(ctx, job2.ID)
		<-ran2
	}()
	cps, err := f.REST.Checkpoints(ctx, job2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := cps.Latest.Restored; r == nil || r.ID != id {
		t.Errorf("the new job restored %+v, want checkpoint %d", r, id)
	}
	if first := firstPos.Load(); first <= 0 {
		t.Errorf("the restored DoFn started at position %d, want past 0 (it was at %d)", first, endedAt)
	} else {
		t.Logf("the restored DoFn resumed at position %d (was at %d)", first, endedAt)
	}
}
