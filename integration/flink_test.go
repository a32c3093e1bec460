package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	beamflink "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
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

// Read -> tag -> Write (crashpipeline), read bounded, on Flink's embedded
// cluster: every input message reaches the output topic, and each is acked
// exactly once. (The session cluster runs the same in
// TestFlinkProcessEnvironment, and the quickstart in TestFlinkExamples.)
func TestFlinkReadWrite(t *testing.T) {
	t.Parallel()
	bin := crash.BuildPipeline(t)
	for _, mode := range flinkModes[:1] {
		t.Run(mode.name, func(t *testing.T) {
			f := flink.Start(t, mode.opts)
			e, srv := emulator.Fake(t)
			const n = 300
			c := crash.NewTopology(t, e, "flink-"+mode.name, n, nil)
			start := time.Now()
			p := crash.Start(t, bin, "submitter", append(f.RunnerArgs(), c.Args("--idle_timeout=5s")...)...)
			if err := p.Wait(flinkRunLimit); err != nil {
				t.Fatalf("%v\nstderr tail:\n%s\njob server log tail:\n%s\ntaskmanager-0 log tail:\n%s\ntaskmanager-1 log tail:\n%s",
					err, crash.Tail(p.Stderr(), 3000), f.Log("jobserver", 6000), f.Log("taskmanager-0", 4000), f.Log("taskmanager-1", 4000))
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
// cluster. Each is submitted as a user would to their own job server, its
// reads acking at the checkpoints they turn on, and each job ends by
// itself once its bounded read is done.
func TestFlinkExamples(t *testing.T) {
	t.Parallel()
	for _, mode := range flinkModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel() // each mode starts a Flink of its own
			examples := []string{"quickstart", "windowedcounts", "deadletters", "typed"}
			if mode.opts.Session {
				examples = examples[:1]
			}
			f := flink.Start(t, mode.opts)
			for _, example := range examples {
				t.Run(example, func(t *testing.T) {
					bin := crash.Build(t, "github.com/pubsubio/beam-pubsubio/examples/"+example, example)
					start := time.Now()
					p := crash.Start(t, bin, example, f.UserArgs()...)
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

// steadyReadFor is how long TestFlinkCheckpointsDuringSteadyRead publishes,
// then stays idle, watching the checkpoints and the read's bundles.
const steadyReadFor = 30 * time.Second

// bundles counts the bundles of the stage the read's bundles run in: on
// Flink each holds one bundle of the read's one split, and each such bundle
// ends with a self-checkpoint, which Beam 2.56 keeps as one more Flink
// state (docs/upstream/flink-drain-and-resume-delay.md). Process-wide:
// this test process is the LOOPBACK worker.
var bundles atomic.Int64

type bundleCountFn struct{}

func (bundleCountFn) StartBundle(func(pubsubio.Message)) { bundles.Add(1) }

func (bundleCountFn) ProcessElement(m pubsubio.Message, emit func(pubsubio.Message)) {
	emit(pubsubio.Message{Data: m.Data, Attributes: map[string]string{"in": m.ID}})
}

func init() {
	register.DoFn2x0[pubsubio.Message, func(pubsubio.Message)](&bundleCountFn{})
}

// Read -> Write, unbounded, in this process on the embedded cluster with a
// checkpoint every second, while messages arrive at 100 a second for
// steadyReadFor and then nothing for as long: checkpoints complete during
// the read, each within twice the interval, and the read runs about one
// bundle a second, whose pace sets how long an unbounded job lasts before
// Beam 2.56's per-residual state reaches Flink's limit of 32,767.
func TestFlinkCheckpointsDuringSteadyRead(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
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
	job := runOnFlinkInProcess(ctx, t, f, "steady", func(s beam.Scope, conn pubsubio.Connection, commit pubsubio.ReadConfig) {
		commit.Subscriptions, commit.Connection = []pubsubio.Subscription{sub}, conn
		pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, Connection: conn}, beam.ParDo(s, &bundleCountFn{}, pubsubio.Read(s, commit)))
	})

	// Publish at 100 a second until the first copies come out (the tasks
	// are deployed and reading), then for steadyReadFor more.
	pub := client.Publisher(in.String())
	defer pub.Stop()
	published := 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var start time.Time
	var steady, idle phase
	for start.IsZero() || time.Since(start) < steadyReadFor {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up: %d published, %d received", published, received.Load())
		case <-tick.C:
		}
		pub.Publish(ctx, &pubsub.Message{Data: emulator.Payload(published, 256)})
		published++
		if start.IsZero() && received.Load() > 0 {
			start = time.Now()
			steady.begin(ctx, t, f, job.ID)
			t.Logf("first output %v after the job started; watching for %v", time.Since(time.UnixMilli(job.StartTime)).Round(time.Millisecond), steadyReadFor)
		}
	}
	steady.end(ctx, t, f, job.ID)
	idle.begin(ctx, t, f, job.ID)
	select {
	case <-ctx.Done():
	case <-time.After(steadyReadFor): // the idle phase being measured, not a synchronization
	}
	idle.end(ctx, t, f, job.ID)
	for _, ph := range []struct {
		name string
		p    phase
	}{{"100 msg/s", steady}, {"idle", idle}} {
		perSecond := float64(ph.p.bundles) / ph.p.took.Seconds()
		t.Logf("FLINK STEADY %s for %v: %d checkpoints completed, %d failed, slowest %d ms; read bundles %.2f/s, so %.1f h to 32,767 states at one split per subtask",
			ph.name, ph.p.took.Round(time.Second), ph.p.completed, ph.p.failed, ph.p.slowest, perSecond, 32767/perSecond/3600)
		if want := int(ph.p.took / interval / 2); ph.p.completed < want {
			t.Errorf("%s: %d checkpoints completed in %v at a %v interval, want at least %d (one per two intervals)", ph.name, ph.p.completed, ph.p.took.Round(time.Second), interval, want)
		}
	}
	t.Logf("%d published, %d on the output", published, received.Load())
	if received.Load() == 0 {
		t.Error("nothing reached the output")
	}
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
}

// phase is what a stretch of TestFlinkCheckpointsDuringSteadyRead saw.
type phase struct {
	at                time.Time
	before            flink.Checkpoints
	bundles0          int64
	took              time.Duration
	completed, failed int
	slowest           int64 // ms
	bundles           int64
}

func (p *phase) begin(ctx context.Context, t *testing.T, f *flink.Flink, job string) {
	var err error
	if p.before, err = f.REST.Checkpoints(ctx, job); err != nil {
		t.Fatal(err)
	}
	p.at, p.bundles0 = time.Now(), bundles.Load()
}

func (p *phase) end(ctx context.Context, t *testing.T, f *flink.Flink, job string) {
	after, err := f.REST.Checkpoints(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	p.took, p.bundles = time.Since(p.at), bundles.Load()-p.bundles0
	p.completed = after.Counts.Completed - p.before.Counts.Completed
	p.failed = after.Counts.Failed - p.before.Counts.Failed
	for _, c := range after.History {
		if c.TriggerTimestamp >= p.at.UnixMilli() && c.Status == "COMPLETED" {
			p.slowest = max(p.slowest, c.EndToEndDuration)
		}
	}
}

// processArgs are f's flags for a PROCESS environment running bin's
// workers through boot.
func processArgs(t *testing.T, f *flink.Flink, boot, bin string) []string {
	t.Helper()
	args, err := f.ProcessRunnerArgs(boot, bin)
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// submitTo points this process's job submissions at f's job server, with
// a LOOPBACK worker and the job name given, until the test ends: the
// tests after it submit to Prism again.
func submitTo(t *testing.T, f *flink.Flink, jobName string) {
	endpoint, env, name := *jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.JobName
	*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.JobName = f.Endpoint, "LOOPBACK", jobName
	t.Cleanup(func() { *jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.JobName = endpoint, env, name })
}

// runOnFlinkInProcess submits the pipeline build makes to f from this
// process, which becomes its LOOPBACK worker, and waits until it runs.
// build gets the emulator's connection and a ReadConfig with the commit
// settings for f; the job is cancelled when the test ends.
func runOnFlinkInProcess(ctx context.Context, t *testing.T, f *flink.Flink, name string, build func(s beam.Scope, conn pubsubio.Connection, commit pubsubio.ReadConfig)) flink.Job {
	t.Helper()
	e := emulator.Require(t)
	jobName := fmt.Sprintf("pubsubio-it-%s-%d", name, time.Now().UnixNano())
	submitTo(t, f, jobName)
	p, s := beam.NewPipelineWithRoot()
	build(s, pubsubio.Connection{EmulatorEndpoint: e.Endpoint}, pubsubio.ReadConfig{
		Commit: pubsubio.CommitFlinkCheckpoint,
		Flink:  pubsubio.FlinkCheckpoints{REST: f.REST.Addr, Job: jobName},
	})
	ran := make(chan error, 1)
	go func() {
		_, err := beamflink.Execute(ctx, p)
		ran <- err
	}()
	job, err := f.REST.AwaitRunningJob(ctx)
	if err != nil {
		t.Fatalf("%v\n--- job server log ---\n%s", err, f.Log("jobserver", 8000))
	}
	t.Cleanup(func() {
		_ = f.REST.Cancel(context.Background(), job.ID)
		<-ran // a cancelled job ends Execute with the cancellation
	})
	return job
}

// Read -> tag -> Write (crashpipeline), read bounded, on the session
// cluster with the job's tasks spread over both TaskManagers, each
// starting its SDK workers with the Go boot program (PROCESS), submitted
// as a user would, acking at the checkpoints the read turns on: the job
// ends by itself (the read's drain, from a worker of a TaskManager), and
// every input message reaches the output and is acked exactly once.
// (Under LOOPBACK two TaskManagers collide on worker IDs: see
// flink.Options.SpreadTasks.)
func TestFlinkProcessEnvironment(t *testing.T) {
	t.Parallel()
	bin := crash.BuildPipeline(t)
	boot := crash.Build(t, bootPackage, "boot")
	f := flink.Start(t, flink.Options{Session: true, SpreadTasks: true})
	e, srv := emulator.Fake(t)
	const n = 300
	c := crash.NewTopology(t, e, "flink-process", n, nil)
	start := time.Now()
	env, err := f.ProcessEnvironmentArgs(boot, bin)
	if err != nil {
		t.Fatal(err)
	}
	p := crash.Start(t, bin, "submitter", append(f.UserArgs(env...), c.Args("--idle_timeout=5s")...)...)
	if err := p.Wait(flinkRunLimit); err != nil {
		t.Fatalf("%v\nstderr tail:\n%s\njob server log tail:\n%s\ntaskmanager-0 log tail:\n%s\ntaskmanager-1 log tail:\n%s",
			err, crash.Tail(p.Stderr(), 3000), f.Log("jobserver", 6000), f.Log("taskmanager-0", 4000), f.Log("taskmanager-1", 4000))
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

// A bounded read through Deduplicate in event time on Flink's embedded
// cluster, without checkpoints: the job ends once the read has, with every
// ID once. (Before the custom coders it failed in Java's MapCoder.) In
// processing time, run once, the job did not end: the deduplicating stage
// stayed RUNNING after its input ended (docs/runners.md, Running on Flink).
func TestFlinkDeduplicateEnds(t *testing.T) {
	if isolated(t) {
		return
	}
	f := flink.Start(t, flink.Options{})
	e, srv := emulator.Fake(t)
	topic := e.CreateTopic(t, "flink-dedup")
	sub := e.CreateSubscription(t, topic, "flink-dedup", 10*time.Second)
	const n = 50
	e.Publish(t, topic, n, 64, func(i int) map[string]string { return map[string]string{"k": fmt.Sprint(i % 25)} })
	out := e.CreateTopic(t, "flink-dedup-out")

	submitTo(t, f, "")
	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{sub}, MaxMessages: n, Commit: pubsubio.CommitResume, Connection: conn})
	once := pubsubio.Deduplicate(s, pubsubio.DedupConfig{IDAttribute: "k", TimeDomain: pubsubio.DedupEventTime, Horizon: time.Hour}, msgs)
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, Connection: conn}, beam.ParDo(s, &bundleCountFn{}, once))
	ctx, cancel := context.WithTimeout(t.Context(), flinkRunLimit)
	defer cancel()
	start := time.Now()
	if _, err := beamflink.Execute(ctx, p); err != nil {
		t.Fatalf("the job failed or did not end within %v: %v\n--- job server log ---\n%s", flinkRunLimit, err, f.Log("jobserver", 6000))
	}
	// The job has ended: everything it wrote is on the server.
	written := 0
	for _, m := range srv.Messages() {
		if m.Topic == out.String() {
			written++
		}
	}
	t.Logf("Deduplicate on Flink: %d of %d messages written (25 keys), the job ended in %v", written, n, time.Since(start).Round(time.Millisecond))
	if written != n/2 {
		t.Errorf("%d messages written, want one per key, %d", written, n/2)
	}
}
