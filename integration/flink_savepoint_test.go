package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
)

// A read's job restores from a savepoint at another parallelism, in both
// directions, on a session cluster: stopped with a savepoint at
// parallelism 2 and restored at 1; saved while running at 1 and restored
// at 2 after a cancel. Every split starts reading again after each
// restore, no message is lost, and the duplicates are counted: what was
// on the output but not acked when the savepoint was taken comes again.
// Operator chaining is off: with it on, Flink chains the Impulse source
// into the read's stage at parallelism 1 only, which changes the
// operators' IDs, and the restore at 1 fails ("Cannot map
// checkpoint/savepoint state for operator ... to the new program").
// The server is pstest: what a stopped job had leased comes back once its
// 10 s lease lapses, where the emulator gives it back in bursts minutes
// later (RELIABILITY.md, Faults).
func TestFlinkSavepointRescale(t *testing.T) {
	t.Parallel()
	e, _ := emulator.Fake(t)
	bin := crash.BuildPipeline(t)
	f := flink.Start(t, flink.Options{Session: true, CheckpointInterval: 2 * time.Second, PipelineOptions: map[string]any{"operatorChaining": false}})
	reads := crash.StartDeliveryCounter(t, e.Endpoint)
	const batch, splits = 300, 4
	c := crash.NewTopology(t, e, "flink-rescale", batch, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	savepoints := filepath.Join(f.Dir, "savepoints")

	// run submits the job at parallelism, restored from the savepoint at
	// from ("" for none), and waits until every message published so far
	// is on the output and every split started reading in the new job.
	run := func(parallelism int, from string) (*crash.Process, flink.Job) {
		t.Helper()
		if err := f.SetRestore(from); err != nil {
			t.Fatal(err)
		}
		started := splitStarts(f)
		before, err := f.REST.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := crash.Start(t, bin, "submitter", append(f.RunnerArgs(), c.Args("--read_emulator="+reads.Endpoint,
			fmt.Sprintf("--parallelism=%d", parallelism), fmt.Sprintf("--splits=%d", splits))...)...)
		job := awaitNewJob(ctx, t, f, before)
		awaitOutput(t, c, p, fmt.Sprintf("parallelism %d from %q", parallelism, from))
		now := splitStarts(f)
		t.Logf("parallelism %d from %q: split starts so far %v", parallelism, from, now)
		for i := range splits {
			if now[i] <= started[i] {
				t.Errorf("parallelism %d from %q: split %d did not start reading", parallelism, from, i)
			}
		}
		return p, job
	}
	// outcome logs what the stop left unacked and the duplicates so far.
	outcome := func(what string) {
		t.Helper()
		ids := c.InputIDs()
		acked := reads.Acked()
		unacked := 0
		for _, id := range ids {
			if _, ok := acked[id]; !ok {
				unacked++
			}
		}
		t.Logf("SAVEPOINT %s: %d inputs, %d on the output, %d duplicates, %d not acked", what, len(ids), c.Out.Distinct(), c.Out.Duplicates(ids), unacked)
	}

	p, job := run(2, "")
	stopped, err := f.REST.StopWithSavepoint(ctx, job.ID, savepoints)
	if err != nil {
		t.Fatalf("stop with a savepoint: %v", err)
	}
	_ = p.Wait(time.Minute)
	outcome("stopped at parallelism 2")

	c.PublishMore(t, batch)
	p, job = run(1, stopped)
	checkRestoredSavepoint(ctx, t, f, job.ID)
	c.PublishMore(t, batch)
	awaitOutput(t, c, p, "parallelism 1, published after the restore")
	saved, err := f.REST.Savepoint(ctx, job.ID, savepoints)
	if err != nil {
		t.Fatalf("savepoint of the running job: %v", err)
	}
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait(time.Minute)
	outcome("saved at parallelism 1, then cancelled")

	c.PublishMore(t, batch)
	p, job = run(2, saved)
	checkRestoredSavepoint(ctx, t, f, job.ID)
	// What the cancelled job emitted after the savepoint is on the output
	// but rolled back: it is acked once its lease lapses and the restored
	// job reads it again.
	if got := reads.AwaitAcked(len(c.InputIDs()), outputWait); got < len(c.InputIDs()) {
		t.Errorf("%d of %d messages acked", got, len(c.InputIDs()))
	}
	outcome("restored at parallelism 2")
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait(time.Minute)
}

// outputWait bounds the wait for every message published so far to be on
// the output, and acked: what the stop and the cancel left leased comes
// back when its lease lapses, and a loaded machine runs a restored job's
// first bundles late.
const outputWait = 6 * time.Minute

// awaitOutput waits until every input of c is on the output, failing the
// test with the submitter's log if not; it logs how long that took.
func awaitOutput(t *testing.T, c *crash.Topology, p *crash.Process, what string) {
	t.Helper()
	start, want := time.Now(), len(c.InputIDs())
	if got := c.Out.AwaitDistinct(want, outputWait); got < want {
		t.Fatalf("%s: %d of %d messages on the output within %v; submitter stderr:\n%s", what, got, want, outputWait, crash.Tail(p.Stderr(), 3000))
	}
	t.Logf("%s: all %d messages on the output in %v", what, want, time.Since(start).Round(time.Second))
}

// awaitNewJob waits until a job not among before runs; it fails the test
// with the job's exceptions if the job fails instead.
func awaitNewJob(ctx context.Context, t *testing.T, f *flink.Flink, before []flink.Job) flink.Job {
	t.Helper()
	old := map[string]bool{}
	for _, j := range before {
		old[j.ID] = true
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		jobs, err := f.REST.Jobs(ctx)
		for _, j := range jobs {
			switch {
			case old[j.ID]:
			case j.State == "RUNNING":
				return j
			case j.State == "FAILED":
				ex, err := f.REST.Exceptions(ctx, j.ID)
				t.Fatalf("job %s failed (%v):\n%s", j.ID, err, strings.Join(ex, "\n---\n"))
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no new job runs (%v)", err)
		case <-tick.C:
		}
	}
}

// checkRestoredSavepoint checks that job started from a savepoint.
func checkRestoredSavepoint(ctx context.Context, t *testing.T, f *flink.Flink, job string) {
	t.Helper()
	cps, err := f.REST.Checkpoints(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if r := cps.Latest.Restored; r == nil || !r.IsSavepoint {
		t.Errorf("job %s did not start from a savepoint (restored %+v)", job, r)
	}
}

var splitStartLine = regexp.MustCompile(`pubsubio\.Read: split (\d+) of \S+ starts reading`)

// splitStarts counts, by split index, the lines in the TaskManagers' logs
// (where SDK workers' logs go) saying a split started reading.
func splitStarts(f *flink.Flink) map[int]int {
	n := map[int]int{}
	for i := range 2 {
		for _, m := range splitStartLine.FindAllStringSubmatch(f.Log(fmt.Sprintf("taskmanager-%d", i), 64<<20), -1) {
			idx, _ := strconv.Atoi(m[1])
			n[idx]++
		}
	}
	return n
}
