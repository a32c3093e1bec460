package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
