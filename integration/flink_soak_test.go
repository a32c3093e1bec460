package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
)

// The Flink soak (PUBSUB_IT_LONG=1; `go run ./scripts/reliability
// --only=flinksoak`, not in CI): the fused pipeline on a session cluster of
// two TaskManagers with PROCESS workers and checkpoints every 2 s, fed
// 1,000 msg/s for PUBSUB_IT_FLINK_SOAK (default 30m). Every 5 minutes the
// TaskManager running the job is killed with its SDK workers, and started
// again once Flink restored the job on the other; once, between two
// kills, the JobManager's REST API answers 503 to the read for a minute.
// No fed message may be lost. It reports duplicates, the checkpoints'
// sizes over time, the checkpointed state's growth per hour, and the time
// to Flink's "Too many states" at the read's rate of bundles, each of which
// registers a Flink state that is never cleared on this job server
// (docs/upstream/flink-drain-and-resume-delay.md).
const (
	envFlinkSoak = "PUBSUB_IT_FLINK_SOAK" // the soak's duration (time.ParseDuration)

	flinkSoakDefault     = 30 * time.Minute
	flinkSoakRate        = 1000 // messages per second
	flinkSoakKillEvery   = 5 * time.Minute
	flinkSoakOutageAt    = 12*time.Minute + 30*time.Second // halfway between the second and the third kill
	flinkSoakSampleEvery = 15 * time.Second
	flinkSoakRestore     = 3 * time.Minute // bound on Flink restoring the job after a kill
	// flinkSoakArrival bounds the wait for the last outputs once the feed
	// stopped: the emulator gives a killed worker's messages back in
	// bursts minutes later (RELIABILITY.md).
	flinkSoakArrival = 15 * time.Minute
	// flinkStatesLimit is how many states a Flink heap snapshot takes
	// (HeapSnapshotResources: "Too many states").
	flinkStatesLimit = 32767
)

func TestFlinkSoak(t *testing.T) {
	longTests(t)
	d := soakDuration(t, envFlinkSoak, flinkSoakDefault, flinkSoakKillEvery+time.Minute)
	e := emulator.Require(t)
	bin := crash.BuildPipeline(t)
	boot := crash.Build(t, bootPackage, "boot")
	f := flink.Start(t, flink.Options{Session: true, CheckpointInterval: 2 * time.Second})
	api := flink.StartRESTProxy(t, f.REST.Addr)
	c := crash.NewTopology(t, e, "flink-soak", 0, nil)

	ctx, cancel := context.WithTimeout(t.Context(), d+flinkSoakArrival+10*time.Minute)
	defer cancel()
	args := append(processArgs(t, f, boot, bin), "--pubsubio_flink_rest="+api.Addr) // the last flag wins
	p := crash.Start(t, bin, "submitter", append(args, c.Args()...)...)
	job, err := f.REST.AwaitRunningJob(ctx)
	if err != nil {
		t.Fatalf("%v\nsubmitter stderr:\n%s", err, crash.Tail(p.Stderr(), 3000))
	}
	start := time.Now()
	chaos := startFlinkChaos(ctx, t, f, api, job.ID, start, d)

	s := flinkSoakSamples{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for next := start; time.Since(start) < d; {
		if due := int(time.Since(start).Seconds()*flinkSoakRate) - len(c.InputIDs()); due > 0 {
			c.PublishMore(t, min(due, flinkSoakRate))
		}
		if time.Now().After(next) {
			s.sample(ctx, t, f, job.ID, time.Since(start), len(c.InputIDs()), c.Out.Distinct())
			next = next.Add(flinkSoakSampleEvery)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the soak's deadline passed while feeding: %d fed", len(c.InputIDs()))
		case <-p.Exited():
			t.Fatalf("the submitter exited during the soak: %v\nstderr:\n%s", p.Err(), crash.Tail(p.Stderr(), 5000))
		case <-tick.C:
		}
	}
	fed, fedFor := len(c.InputIDs()), time.Since(start)
	kills := <-chaos
	missing := c.Lost(t, flinkSoakArrival, "flink-soak", 0, kills, 0, time.Since(start))
	s.sample(ctx, t, f, job.ID, time.Since(start), fed, c.Out.Distinct())
	if len(missing) > 0 {
		t.Errorf("%d of %d fed messages never reached the output, e.g. %v", len(missing), fed, missing[:min(5, len(missing))])
	}
	s.report(t, fed, fedFor, kills, c.Out.Duplicates(c.InputIDs()))
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Error(err)
	}
	_ = p.Wait(time.Minute) // a cancelled job's submitter exits with the cancellation
}

// startFlinkChaos injects the soak's faults in the background: a
// TaskManager killed every flinkSoakKillEvery before d, and the REST
// API's minute down when it fits in d. The channel gives the number of
// kills once every fault is over.
func startFlinkChaos(ctx context.Context, t *testing.T, f *flink.Flink, api *flink.RESTProxy, job string, start time.Time, d time.Duration) <-chan int {
	at := func(offset time.Duration) <-chan time.Time { return time.After(time.Until(start.Add(offset))) }
	since := func() time.Duration { return time.Since(start).Round(time.Second) }
	var wg sync.WaitGroup
	wg.Go(func() {
		if flinkSoakOutageAt+time.Minute >= d {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-at(flinkSoakOutageAt):
		}
		api.SetDown(true)
		t.Logf("FLINK-SOAK-FAULT at %v: the REST API answers 503 to the read for %v", since(), time.Minute)
		select {
		case <-ctx.Done():
		case <-at(flinkSoakOutageAt + time.Minute):
		}
		api.SetDown(false)
		t.Logf("FLINK-SOAK-FAULT at %v: the REST API answers again (%d requests refused)", since(), api.Refused())
	})
	n := 0
	wg.Go(func() {
		for offset := flinkSoakKillEvery; offset < d; offset += flinkSoakKillEvery {
			select {
			case <-ctx.Done():
				return
			case <-at(offset):
			}
			if err := killJobTaskManager(ctx, f, job); err != nil {
				t.Errorf("FLINK-SOAK-FAULT at %v: %v", since(), err)
				return
			}
			n++
			t.Logf("FLINK-SOAK-FAULT at %v: kill %d done: Flink restored the job, and both TaskManagers are registered", since(), n)
		}
	})
	kills := make(chan int, 1)
	go func() {
		wg.Wait()
		kills <- n
	}()
	return kills
}

// killJobTaskManager kills the TaskManager running job, waits until Flink
// restored the job, and starts the TaskManager again.
func killJobTaskManager(ctx context.Context, f *flink.Flink, job string) error {
	tms, err := f.REST.TaskManagersOf(ctx, job)
	if err != nil || len(tms) != 1 {
		return fmt.Errorf("finding the job's TaskManager: %v (running subtasks on %v)", err, tms)
	}
	i, err := strconv.Atoi(strings.TrimPrefix(tms[0], "taskmanager-"))
	if err != nil {
		return fmt.Errorf("the job runs on %q, not a TaskManager of the harness", tms[0])
	}
	before, err := f.REST.Checkpoints(ctx, job)
	if err != nil {
		return err
	}
	if err := f.KillTaskManager(i); err != nil {
		return err
	}
	restoreCtx, cancel := context.WithTimeout(ctx, flinkSoakRestore)
	defer cancel()
	for {
		cps, err := f.REST.Checkpoints(restoreCtx, job)
		if err == nil && cps.Counts.Restored > before.Counts.Restored {
			break
		}
		select {
		case <-restoreCtx.Done():
			return fmt.Errorf("the job did not restore within %v of killing TaskManager %d (last: %v)", flinkSoakRestore, i, err)
		case <-time.After(time.Second):
		}
	}
	if err := f.StartTaskManager(i); err != nil {
		return err
	}
	return f.AwaitTaskManagers(restoreCtx, 2)
}

// flinkSoakSamples are the soak's readings over time.
type flinkSoakSamples struct {
	at        []time.Duration
	stateSize []int64 // the latest completed checkpoint's, bytes
	// bundles counts the read stage's bundles over the spans between two
	// readings of its counter that saw no reset (a new SDK worker starts
	// from zero); countedFor is the sum of those spans.
	bundles, lastCounter float64
	lastCounterAt        time.Duration
	countedFor           time.Duration
	counterRead          bool
}

// sample reads the job's latest checkpoint and the read stage's bundle
// counter, and logs them with what was fed and output by then.
func (s *flinkSoakSamples) sample(ctx context.Context, t *testing.T, f *flink.Flink, job string, at time.Duration, fed, out int) {
	cps, err := f.REST.Checkpoints(ctx, job)
	if err != nil || cps.Latest.Completed == nil {
		t.Logf("FLINK-SOAK-SAMPLE at %v: no completed checkpoint to read (%v)", at.Round(time.Second), err)
		return
	}
	size := cps.Latest.Completed.StateSize
	s.at, s.stateSize = append(s.at, at), append(s.stateSize, size)
	m, err := f.REST.OperatorMetrics(ctx, job, "crashpipeline_bundles")
	if counter, ok := m["crashpipeline_bundles"]; err == nil && ok {
		if s.counterRead && counter >= s.lastCounter {
			s.bundles += counter - s.lastCounter
			s.countedFor += at - s.lastCounterAt
		}
		s.lastCounter, s.lastCounterAt, s.counterRead = counter, at, true
	}
	t.Logf("FLINK-SOAK-SAMPLE at %v: fed %d, on the output %d distinct; checkpoint %d of %d bytes (%d completed, %d failed, %d restores); read-stage bundles %.2f/s",
		at.Round(time.Second), fed, out, cps.Latest.Completed.ID, size, cps.Counts.Completed, cps.Counts.Failed, cps.Counts.Restored, s.bundleRate())
}

// bundleRate is the read stage's bundles per second over the spans counted.
func (s *flinkSoakSamples) bundleRate() float64 {
	if s.countedFor <= 0 {
		return 0
	}
	return s.bundles / s.countedFor.Seconds()
}

// report logs the soak's result: state growth by a least-squares fit of
// the checkpoint sizes, and the projected time to Flink's state limit.
func (s *flinkSoakSamples) report(t *testing.T, fed int, fedFor time.Duration, kills, duplicates int) {
	var n, sx, sy, sxx, sxy float64
	for i, at := range s.at {
		x, y := at.Hours(), float64(s.stateSize[i])
		n, sx, sy, sxx, sxy = n+1, sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	var perHour float64
	if n > 1 && n*sxx != sx*sx {
		perHour = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	}
	toLimit := "unknown (no bundle counted)"
	if r := s.bundleRate(); r > 0 {
		toLimit = fmt.Sprintf("%.1f h", flinkStatesLimit/r/3600)
	}
	first, last := int64(0), int64(0)
	if len(s.stateSize) > 0 {
		first, last = s.stateSize[0], s.stateSize[len(s.stateSize)-1]
	}
	t.Logf("FLINK-SOAK-RESULT fed %d in %v (%.0f msg/s), %d TaskManagers killed, %d duplicates on the output; checkpoint size %d bytes first, %d last, growing %.0f bytes/h; read-stage bundles %.2f/s, so %s to %d states at one split per subtask",
		fed, fedFor.Round(time.Second), float64(fed)/fedFor.Seconds(), kills, duplicates, first, last, perHour, s.bundleRate(), toLimit, flinkStatesLimit)
}
