package flink

import (
	"context"
	"flag"
	"math"
	"os"
	"path/filepath"
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
)

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
	emit(pos)
	return sdf.ResumeProcessingIn(fn.Resume)
}

func discard(int64) {}

func init() {
	register.DoFn3x1[*sdf.LockRTracker, int, func(int64), sdf.ProcessContinuation](&tickFn{})
	register.Emitter1[int64]()
	register.Function1x0(discard)
}

// TestCheckpointsWhileSDFRuns: with checkpoints turned on as pipeline
// options (through the proxy), checkpoints complete every interval while a
// splittable DoFn runs, into file-system storage under CheckpointDir, and
// the DoFn resumes at its requested pace rather than in a busy loop.
func TestCheckpointsWhileSDFRuns(t *testing.T) {
	for _, session := range []bool{false, true} {
		name := "embedded"
		if session {
			name = "session"
		}
		t.Run(name, func(t *testing.T) { checkpointsWhileSDFRuns(t, session) })
	}
}

func checkpointsWhileSDFRuns(t *testing.T, session bool) {
	const interval = time.Second
	f := Start(t, Options{Session: session, CheckpointInterval: interval, RetainCheckpoints: true})
	*jobopts.Endpoint = f.Endpoint
	*jobopts.EnvironmentType = "LOOPBACK"
	tickCalls.Store(0)
	stopTicks.Store(false)

	p, s := beam.NewPipelineWithRoot()
	ticks := beam.ParDo(s, &tickFn{Resume: time.Second}, beam.CreateList(s, []int{0, 1}))
	beam.ParDo0(s, discard, ticks)

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		_, err := beamflink.Execute(ctx, p)
		ran <- err
	}()
	defer func() {
		stopTicks.Store(true)
		cancel()
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
	path := strings.TrimPrefix(latest.ExternalPath, "file:")
	if !strings.HasPrefix(path, f.CheckpointDir) {
		t.Errorf("latest checkpoint at %q, want it under %s", latest.ExternalPath, f.CheckpointDir)
	}
	if _, err := os.Stat(filepath.Join(path, "_metadata")); err != nil {
		t.Errorf("checkpoint %d: %v", latest.ID, err)
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
	if _, err := os.Stat(filepath.Join(path, "_metadata")); err != nil {
		t.Errorf("the retained checkpoint %d is gone after the cancel: %v", latest.ID, err)
	}
}
