package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
)

// restOutage is how long the JobManager's REST API answers 503 each time:
// as long as a leader election or a slow start was seen to take.
const restOutage = time.Minute

// With the JobManager's REST API answering 503 for the job's first minute
// and again for a minute mid-run, the read delays its acks and fails
// nothing: every message reaches the output, none is acked while the API
// is down, all are acked once it answers, and the job never restarts.
func TestFlinkRESTOutage(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	bin := crash.BuildPipeline(t)
	f := flink.Start(t, flink.Options{CheckpointInterval: 2 * time.Second})
	api := flink.StartRESTProxy(t, f.REST.Addr)
	reads := crash.StartDeliveryCounter(t, e.Endpoint)
	const half = 500
	c := crash.NewTopology(t, e, "flink-rest-outage", half, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	api.SetDown(true)
	args := append(f.RunnerArgs(), "--pubsubio_flink_rest="+api.Addr) // the last flag wins
	p := crash.Start(t, bin, "submitter", append(args, c.Args("--read_emulator="+reads.Endpoint)...)...)
	job, err := f.REST.AwaitRunningJob(ctx)
	if err != nil {
		t.Fatalf("%v\nsubmitter stderr:\n%s", err, crash.Tail(p.Stderr(), 3000))
	}

	outage := func(what string, want int) {
		t.Helper()
		end := time.After(restOutage)
		if got := c.Out.AwaitDistinct(want, restOutage); got < want {
			t.Fatalf("%s: %d of %d messages on the output; submitter stderr:\n%s", what, got, want, crash.Tail(p.Stderr(), 3000))
		}
		<-end
		acked := len(reads.Acked())
		api.SetDown(false)
		up := time.Now()
		if acked > want-half {
			t.Errorf("%s: %d messages acked while the REST API was down, want at most the %d acked before", what, acked, want-half)
		}
		if got := reads.AwaitAcked(want, 2*time.Minute); got < want {
			t.Fatalf("%s: %d of %d messages acked once the REST API answered; submitter stderr:\n%s", what, got, want, crash.Tail(p.Stderr(), 3000))
		}
		t.Logf("REST OUTAGE %s: %v, %d requests answered 503, %d of %d on the output, %d acked while it lasted, all acked %v after it ended",
			what, restOutage, api.Refused(), c.Out.Distinct(), want, acked, time.Since(up).Round(100*time.Millisecond))
	}
	outage("the job's first minute", half)
	api.SetDown(true)
	c.PublishMore(t, half)
	outage("a minute mid-run", 2*half)

	cps, err := f.REST.Checkpoints(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cps.Counts.Restored > 0 {
		ex, err := f.REST.Exceptions(ctx, job.ID)
		t.Errorf("the job restored %d times during the outages, want none; its exceptions (%v):\n%s\nsubmitter stderr:\n%s",
			cps.Counts.Restored, err, strings.Join(ex, "\n---\n"), crash.Tail(p.Stderr(), 5000))
	}
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait(time.Minute) // a cancelled job's submitter exits with the cancellation
}
