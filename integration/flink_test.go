package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
)

// Beam's Flink runner: Beam Java 2.56's Flink 1.16 job server, started by
// integration/flink from Maven Central jars, with its embedded mini
// cluster or in front of a session cluster of two TaskManagers. The
// pipelines are child processes that submit with --runner=flink
// --environment_type=LOOPBACK and are their own SDK worker. Checkpoints
// are off here: a job with checkpoints on never ends by itself on this
// runner (see flink.Options.CheckpointInterval), and these pipelines end
// when their read does.

// flinkRunLimit bounds one job: deploying its tasks takes 5 to 30 s on a
// loaded 2-core machine, the work a few seconds.
const flinkRunLimit = 5 * time.Minute

// flinkModes are the two ways the tests run Flink.
var flinkModes = []struct {
	name string
	opts flink.Options
}{
	{"embedded", flink.Options{}},
	{"session", flink.Options{Session: true}},
}

// Read -> tag -> Write (crashpipeline), read bounded, on Flink: every input
// message reaches the output topic, and each is acked exactly once.
func TestFlinkReadWrite(t *testing.T) {
	bin := crash.BuildPipeline(t)
	for _, mode := range flinkModes {
		t.Run(mode.name, func(t *testing.T) {
			f := flink.Start(t, mode.opts)
			e, srv := emulator.Fake(t)
			const n = 300
			c := crash.NewTopology(t, e, "flink-"+mode.name, n, nil)
			start := time.Now()
			p := crash.Start(t, bin, "submitter", append(f.RunnerArgs(), c.Args("--idle_timeout=5s")...)...)
			if err := p.Wait(flinkRunLimit); err != nil {
				t.Fatalf("%v\nstderr tail:\n%s\njob server log tail:\n%s", err, crash.Tail(p.Stderr(), 3000), f.Log("jobserver", 6000))
			}
			if !strings.Contains(p.Stdout(), crash.DoneLine) {
				t.Fatalf("the job ended without %q; stdout:\n%s", crash.DoneLine, p.Stdout())
			}
			took := time.Since(start)
			c.Verify(t, "flink-"+mode.name, 0, 0, 1, took)
			var wrong []string
			for _, id := range c.InputIDs() {
				if m := srv.Message(id); m.Acks != 1 {
					wrong = append(wrong, fmt.Sprintf("%s(acks=%d deliveries=%d)", id, m.Acks, m.Deliveries))
				}
			}
			if len(wrong) > 0 {
				t.Errorf("%d of %d input messages not acked exactly once: %v", len(wrong), n, wrong[:min(10, len(wrong))])
			}
			t.Logf("%d messages read, written and acked on Flink (%s) in %v", n, mode.name, took.Round(time.Millisecond))
		})
	}
}

// The examples, each checking what it read, counted or published, on
// Flink's embedded mini cluster; the quickstart also on the session
// cluster.
func TestFlinkExamples(t *testing.T) {
	for _, mode := range flinkModes {
		t.Run(mode.name, func(t *testing.T) {
			examples := []string{"quickstart", "windowedcounts", "deadletters", "typed"}
			if mode.opts.Session {
				examples = examples[:1]
			}
			f := flink.Start(t, mode.opts)
			for _, example := range examples {
				t.Run(example, func(t *testing.T) {
					bin := crash.Build(t, "github.com/pubsubio/beam-pubsubio/examples/"+example, example)
					start := time.Now()
					p := crash.Start(t, bin, example, f.RunnerArgs()...)
					if err := p.Wait(flinkRunLimit); err != nil {
						t.Fatalf("%v\nstdout:\n%s\nstderr tail:\n%s\njob server log tail:\n%s",
							err, p.Stdout(), crash.Tail(p.Stderr(), 3000), f.Log("jobserver", 6000))
					}
					lines := strings.Split(strings.TrimSpace(p.Stdout()), "\n")
					t.Logf("%s on Flink (%s) in %v: %s", example, mode.name, time.Since(start).Round(time.Millisecond),
						strings.Join(lines[max(0, len(lines)-2):], " / "))
				})
			}
		})
	}
}

// steadyReadFor is how long TestFlinkCheckpointsDuringSteadyRead publishes
// and watches the checkpoints.
const steadyReadFor = 30 * time.Second

// Read -> tag -> Write (crashpipeline), unbounded, while messages arrive at
// a steady 100 a second, on the embedded cluster with checkpoints every
// second: checkpoints complete during the read, and the messages flow.
// It reports every figure it sees; what it requires is only that the job
// keeps running, checkpoints complete and messages reach the output, so
// that it measures the read's effect on checkpoints rather than hiding it.
func TestFlinkCheckpointsDuringSteadyRead(t *testing.T) {
	e := emulator.Require(t)
	bin := crash.BuildPipeline(t)
	const interval = time.Second
	f := flink.Start(t, flink.Options{CheckpointInterval: interval})
	in := e.CreateTopic(t, "flink-steady-in")
	sub := e.CreateSubscription(t, in, "flink-steady-in", 10*time.Second)
	out := e.CreateTopic(t, "flink-steady-out")
	outSub := e.CreateSubscription(t, out, "flink-steady-out", 60*time.Second)
	client := e.Client(t)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var received atomic.Int64
	go func() {
		_ = client.Subscriber(outSub.String()).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			received.Add(1)
		})
	}()
	p := crash.Start(t, bin, "submitter", append(f.RunnerArgs(),
		"--emulator="+e.Endpoint, "--subscription="+sub.String(), "--output_topic="+out.String())...)
	job, err := f.REST.AwaitRunningJob(ctx)
	if err != nil {
		t.Fatalf("%v\nsubmitter stderr:\n%s", err, crash.Tail(p.Stderr(), 3000))
	}

	// Publish at 100 a second until the first copies come out (the tasks
	// are deployed and reading), then for steadyReadFor more.
	pub := client.Publisher(in.String())
	defer pub.Stop()
	published := 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var start time.Time
	var before flink.Checkpoints
	for start.IsZero() || time.Since(start) < steadyReadFor {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up: %d published, %d received; submitter stderr:\n%s", published, received.Load(), crash.Tail(p.Stderr(), 3000))
		case <-p.Exited():
			t.Fatalf("the submitter exited: %v\nstderr:\n%s", p.Err(), crash.Tail(p.Stderr(), 3000))
		case <-tick.C:
		}
		pub.Publish(ctx, &pubsub.Message{Data: emulator.Payload(published, 256)})
		published++
		if start.IsZero() && received.Load() > 0 {
			start = time.Now()
			if before, err = f.REST.Checkpoints(ctx, job.ID); err != nil {
				t.Fatal(err)
			}
			t.Logf("first output %v after the job started; watching for %v", time.Since(time.UnixMilli(job.StartTime)).Round(time.Millisecond), steadyReadFor)
		}
	}
	after, err := f.REST.Checkpoints(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	completed := after.Counts.Completed - before.Counts.Completed
	var worst int64
	var sizes []int64
	for _, c := range after.History {
		if c.TriggerTimestamp >= start.UnixMilli() && c.Status == "COMPLETED" {
			worst = max(worst, c.EndToEndDuration)
			sizes = append(sizes, c.StateSize)
		}
	}
	t.Logf("in %v of steady reading at 100 msg/s: %d checkpoints completed, %d failed, %d in progress; slowest %d ms; state sizes %v; %d published, %d on the output",
		steadyReadFor, completed, after.Counts.Failed-before.Counts.Failed, after.Counts.InProgress, worst, sizes, published, received.Load())
	if completed == 0 {
		t.Errorf("no checkpoint completed during %v of reading at a %v interval", steadyReadFor, interval)
	}
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(time.Minute); err == nil || !strings.Contains(p.Stderr(), "cancel") {
		t.Errorf("the cancelled job's submitter exited with %v; stderr tail:\n%s", err, crash.Tail(p.Stderr(), 2000))
	}
}

// Read -> tag -> Write (crashpipeline), read bounded, on the session
// cluster with the job's tasks spread over both TaskManagers, each
// starting its SDK workers with the Go boot program (PROCESS): every input
// message reaches the output and is acked exactly once. (Under LOOPBACK
// two TaskManagers collide on worker IDs: see flink.Options.SpreadTasks.)
func TestFlinkProcessEnvironment(t *testing.T) {
	bin := crash.BuildPipeline(t)
	boot := crash.Build(t, bootPackage, "boot")
	f := flink.Start(t, flink.Options{Session: true, SpreadTasks: true})
	e, srv := emulator.Fake(t)
	const n = 300
	c := crash.NewTopology(t, e, "flink-process", n, nil)
	start := time.Now()
	p := crash.Start(t, bin, "submitter", append(f.ProcessRunnerArgs(boot, bin), c.Args("--idle_timeout=5s")...)...)
	if err := p.Wait(flinkRunLimit); err != nil {
		t.Fatalf("%v\nstderr tail:\n%s\njob server log tail:\n%s", err, crash.Tail(p.Stderr(), 3000), f.Log("jobserver", 6000))
	}
	if !strings.Contains(p.Stdout(), crash.DoneLine) {
		t.Fatalf("the job ended without %q; stdout:\n%s", crash.DoneLine, p.Stdout())
	}
	c.Verify(t, "flink-process", 0, 0, 1, time.Since(start))
	var wrong []string
	for _, id := range c.InputIDs() {
		if m := srv.Message(id); m.Acks != 1 {
			wrong = append(wrong, fmt.Sprintf("%s(acks=%d deliveries=%d)", id, m.Acks, m.Deliveries))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of %d input messages not acked exactly once: %v", len(wrong), n, wrong[:min(10, len(wrong))])
	}
	for i := range 2 {
		name := fmt.Sprintf("taskmanager-%d", i)
		if !strings.Contains(f.Log(name, 4<<20), "Attempting to start process with command") {
			t.Errorf("%s started no SDK worker process: the tasks were not spread", name)
		}
	}
}
