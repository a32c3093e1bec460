package integration

import (
	"context"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
)

// A user's own Flink job server, nothing in front of it: the pipeline's
// flags alone turn on the checkpoints the read needs (pubsubio sets
// checkpointingInterval and finishBundleBeforeCheckpointing on the job it
// submits) and name the job; only the REST address is passed. Every
// message reaches the output and is acked once a checkpoint covers it.
func TestFlinkCheckpointsFromTheFlags(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	bin := crash.BuildPipeline(t)
	f := flink.Start(t, flink.Options{})
	reads := crash.StartDeliveryCounter(t, e.Endpoint)
	const n = 300
	c := crash.NewTopology(t, e, "flink-flags", n, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	args := []string{"--runner=flink", "--endpoint=" + f.JobServerEndpoint, "--environment_type=LOOPBACK", "--pubsubio_flink_rest=" + f.REST.Addr}
	p := crash.Start(t, bin, "submitter", append(args, c.Args("--read_emulator="+reads.Endpoint)...)...)
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
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait(time.Minute)
}
