package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
	"github.com/pubsubio/beam-pubsubio/integration/localport"
)

// submitAsAUser starts a Flink of its own with opts and submits
// crashpipeline to its job server as a user would (flink.UserArgs),
// reading n messages of a topology named name through a counter of
// deliveries and acks, with extra flags.
func submitAsAUser(t *testing.T, name string, n int, opts flink.Options, extra ...string) (*flink.Flink, *crash.Topology, *crash.DeliveryCounter, *crash.Process) {
	e := emulator.Require(t)
	bin := crash.BuildPipeline(t)
	f := flink.Start(t, opts)
	reads := crash.StartDeliveryCounter(t, e.Endpoint)
	c := crash.NewTopology(t, e, name, n, nil)
	p := crash.Start(t, bin, "submitter", append(f.UserArgs(), c.Args(append([]string{"--read_emulator=" + reads.Endpoint}, extra...)...)...)...)
	return f, c, reads, p
}

// awaitAckMetrics waits up to 90 s until read (where, for the messages)
// shows, summed over the read's operators and subtasks, the read's
// messages_acked counter at n and its pending_acks gauge at 0: what an
// operator watches to see that acks follow the checkpoints. Flink
// refreshes what it shows every 10 s at most, and a counter appears once a
// bundle changed it.
func awaitAckMetrics(t *testing.T, where string, read func(names ...string) (map[string]float64, error), n int) {
	t.Helper()
	const acked, pending = "pubsubio_messages_acked", "pubsubio_pending_acks"
	var seen string
	deadline := time.Now().Add(90 * time.Second)
	for {
		m, err := read(acked, pending)
		_, shown := m[pending]
		seen = fmt.Sprintf("metrics %v, error %v", m, err)
		if err == nil && shown && m[acked] >= float64(n) && m[pending] == 0 {
			t.Logf("%s METRICS %s", where, seen)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not show %s at %d and %s at 0 within 90 s of the last ack: %s", where, acked, n, pending, seen)
		}
		time.Sleep(time.Second)
	}
}

// A user's own Flink job server, nothing in front of it: the pipeline's
// flags alone turn on the checkpoints the read needs (pubsubio sets
// checkpointingInterval and finishBundleBeforeCheckpointing on the job it
// submits) and name the job; only the REST address is passed. Every
// message reaches the output and is acked once a checkpoint covers it,
// and both the REST API and the Prometheus reporter show the read's acks
// counted and none pending.
func TestFlinkCheckpointsFromTheFlags(t *testing.T) {
	t.Parallel()
	const n = 300
	ports, err := localport.Reserve(1)
	if err != nil {
		t.Fatal(err)
	}
	prometheus := fmt.Sprintf("127.0.0.1:%d", ports[0])
	f, c, reads, p := submitAsAUser(t, "flink-flags", n, flink.Options{Conf: flink.PrometheusConf(ports[0])})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	job, err := f.REST.AwaitRunningJob(ctx)
	if err != nil {
		t.Fatalf("%v\nsubmitter stderr:\n%s", err, crash.Tail(p.Stderr(), 3000))
	}
	cfg, err := f.REST.CheckpointConfig(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Interval != 2000 {
		t.Errorf("the job checkpoints every %d ms, want the flag's default of 2000", cfg.Interval)
	}
	if got := c.Out.AwaitDistinct(n, 3*time.Minute); got < n {
		t.Fatalf("%d of %d messages on the output; submitter stderr:\n%s", got, n, crash.Tail(p.Stderr(), 3000))
	}
	if got := reads.AwaitAcked(n, 2*time.Minute); got < n {
		t.Fatalf("%d of %d messages acked; submitter stderr:\n%s", got, n, crash.Tail(p.Stderr(), 3000))
	}
	t.Logf("FLAGS job %q checkpoints every %d ms; %d of %d on the output and acked", job.Name, cfg.Interval, n, n)
	awaitAckMetrics(t, "REST", func(names ...string) (map[string]float64, error) {
		return f.REST.OperatorMetrics(ctx, job.ID, names...)
	}, n)
	awaitAckMetrics(t, "PROMETHEUS", func(names ...string) (map[string]float64, error) {
		return flink.ScrapePrometheus(ctx, prometheus, names...)
	}, n)
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait(time.Minute)
}

// A bounded read (--idle_timeout) on a user's own job server, with the
// checkpoints the read turns on: the job ends by itself once the read is
// done (the read drains it), every message reached the output, and every
// ack followed a completed checkpoint triggered after the message's output.
func TestFlinkBoundedReadEnds(t *testing.T) {
	t.Parallel()
	const n = 300
	f, c, reads, p := submitAsAUser(t, "flink-bounded", n, flink.Options{}, "--idle_timeout=5s")
	ctx, cancel := context.WithTimeout(t.Context(), flinkRunLimit)
	defer cancel()
	job, err := f.REST.AwaitRunningJob(ctx)
	if err != nil {
		t.Fatalf("%v\nsubmitter stderr:\n%s", err, crash.Tail(p.Stderr(), 3000))
	}
	running := time.Now()
	cps := watchCheckpoints(ctx, f.REST, job.ID)
	if err := p.Wait(flinkRunLimit); err != nil {
		t.Fatalf("the bounded job did not end: %v\nsubmitter stderr:\n%s\njob server log tail:\n%s", err, crash.Tail(p.Stderr(), 4000), f.Log("jobserver", 6000))
	}
	took := time.Since(running)
	if !strings.Contains(p.Stdout(), crash.DoneLine) {
		t.Fatalf("the job ended without %q; stdout:\n%s", crash.DoneLine, p.Stdout())
	}
	if got := c.Out.AwaitDistinct(n, time.Minute); got < n {
		t.Fatalf("%d of %d messages on the output", got, n)
	}
	if got := reads.AwaitAcked(n, time.Minute); got < n {
		t.Fatalf("%d of %d messages acked by the time the job ended", got, n)
	}
	early, p50 := auditAcks(t, c, reads, cps)
	t.Logf("BOUNDED job %q ended by itself %v after it was seen running; %d of %d on the output and acked, %d acked before a covering checkpoint, output to ack p50 %v",
		job.Name, took.Round(time.Millisecond), n, n, early, p50)
}
