package source

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beammetrics "github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics/metricstest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// What the SDF reports through its own methods, from a sample served by
// the fake Cloud Monitoring: the tracker's progress (bytes claimed, the
// split's share of the backlog bytes), RestrictionSize (the share), and
// the gauges; and one unit of work where there is no sample.
func TestProgressAndSizeReportTheBacklogShare(t *testing.T) {
	srv, settings := newMonitoring(t, "")
	cfg := testConfig(t, func(c *Config) {
		c.Subscriptions = testSubs(2)
		c.Splits = 4 // subscription 0 is read by splits 0 and 2, subscription 1 by 1 and 3
		c.Connection = settings
	})
	busy, other := cfg.Subscriptions[0], cfg.Subscriptions[1]
	measured := time.Now().Add(-2 * time.Minute)
	srv.SetBacklog(busy, measured, 5000, 8_000_000, 10*time.Minute)
	w := watchBacklog(cfg, busy, time.Now())
	defer w.release()
	awaitCondition(t, "the sample", func() bool { _, ok := w.latest(); return ok })

	fn := &readFn{SplitCount: 4, Cfg: cfg}
	split := Split{Index: 2, Subscription: busy}
	if got := fn.RestrictionSize(split, Restriction{Seq: 3}); got != 4_000_000 {
		t.Errorf("RestrictionSize = %v, want half of 8,000,000 backlog bytes (two splits)", got)
	}
	if got := fn.RestrictionSize(split, Restriction{Final: true}); got != 1 {
		t.Errorf("RestrictionSize of the final restriction = %v, want 1", got)
	}
	if got := fn.RestrictionSize(Split{Index: 1, Subscription: other}, Restriction{}); got != 1 {
		t.Errorf("RestrictionSize without a sample = %v, want 1", got)
	}

	rt := sdf.NewLockRTracker(newTracker(Restriction{Seq: 3}, processID))
	fn.trackBacklog(rt, &splitReader{backlog: w}, split)
	rt.TryClaim(claimOf("a"))
	rt.TryClaim(claimOf("b"))
	if done, remaining := rt.GetProgress(); done != 2*claimSize || remaining != 4_000_000 {
		t.Errorf("GetProgress = %v, %v; want %d bytes done, 4,000,000 remaining", done, remaining, 2*claimSize)
	}
	rt.TrySplit(0)
	if _, remaining := rt.GetProgress(); remaining != 0 {
		t.Errorf("after the checkpoint: %v remaining, want 0", remaining)
	}

	// An empty backlog still reports one unit: the split is not finished.
	srv.Reset()
	srv.SetBacklog(busy, time.Now().Add(-time.Minute), 0, 0, 0)
	w.s.mu.Lock()
	w.s.subs[busy].asked = time.Time{} // due at once
	w.s.mu.Unlock()
	select {
	case w.s.wake <- struct{}{}:
	default: // a wake is pending already
	}
	awaitCondition(t, "the empty sample", func() bool { s, _ := w.latest(); return s.Bytes.Known() && s.Bytes.Value == 0 })
	if got := fn.RestrictionSize(split, Restriction{}); got != 1 {
		t.Errorf("RestrictionSize of an empty backlog = %v, want 1", got)
	}
}

func TestBacklogGaugesReportTheLatestSample(t *testing.T) {
	srv, settings := newMonitoring(t, "")
	cfg := testConfig(t, func(c *Config) { c.Connection = settings })
	sub := cfg.Subscriptions[0]
	srv.SetBacklog(sub, time.Now().Add(-2*time.Minute), 12, 3400, 95*time.Second)
	r := &splitReader{split: Split{Subscription: sub}, cfg: cfg, backlog: watchBacklog(cfg, sub, time.Now())}
	defer r.backlog.release()
	awaitCondition(t, "the sample", func() bool { _, ok := r.backlog.latest(); return ok })

	ctx := metricstest.BundleContext()
	r.reportBacklog(ctx)
	got := gaugeValues(t, ctx)
	want := map[string]int64{
		"backlog_messages." + sub.String():      12,
		"backlog_bytes." + sub.String():         3400,
		"oldest_unacked_age_ms." + sub.String(): 95000,
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("gauge %s = %d, want %d (all: %v)", name, got[name], v, got)
		}
	}
	if c := metricstest.CounterSums(t, ctx); c["backlog_samples"] < 1 {
		t.Errorf("backlog_samples reported %d, want at least this test's sample", c["backlog_samples"])
	}
}

// gaugeValues are the read's gauges reported in ctx, by name.
func gaugeValues(t *testing.T, ctx context.Context) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	err := beammetrics.Extractor{GaugeInt64: func(l beammetrics.Labels, v int64, _ time.Time) {
		if l.Namespace() == metrics.Namespace {
			got[l.Name()] = v
		}
	}}.ExtractFrom(beammetrics.GetStore(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A bundle of a read that samples: while it emits, the tracker reports
// the bytes emitted so far as done and the backlog as remaining, and the
// bundle reports its subscription's gauges; the bundle's split reader
// gets its sample from the process's sampler (the registry's watch).
func TestBundleReportsTheBacklog(t *testing.T) {
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "backlogged", 1)
	sub := subs[0]
	mon, settings := newMonitoring(t, f.srv.Addr)
	mon.SetBacklog(sub, time.Now().Add(-2*time.Minute), 3, 9000, 30*time.Second)
	f.publish(t, topic, 3, nil) // 9 bytes each
	cfg := testConfig(t, func(c *Config) {
		c.Subscriptions = subs
		c.Connection = settings
		c.PollDelay = 50 * time.Millisecond
	})
	// The first answer, before the bundle: its split reader shares it.
	early := watchBacklog(cfg, sub, time.Now())
	defer early.release()
	awaitCondition(t, "the sample", func() bool { _, ok := early.latest(); return ok })

	fn := &readFn{ReadID: "backlogged", SplitCount: 1, Cfg: cfg}
	fn.Setup()
	defer fn.Teardown()
	type progress struct{ done, remaining float64 }
	var seen []progress
	var gauges map[string]int64
	rest := Restriction{}
	deadline := time.Now().Add(waitLimit)
	for len(seen) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 messages emitted within %v", len(seen), waitLimit)
		}
		rt := sdf.NewLockRTracker(newTracker(rest, processID))
		emit := func(beam.EventTime, model.Message) {
			done, remaining := rt.GetProgress()
			seen = append(seen, progress{done, remaining})
		}
		dead := func(beam.EventTime, dlq.FailedMessage) { t.Error("a dead letter") }
		ctx := metricstest.BundleContext()
		pc, err := fn.ProcessElement(ctx, fn.CreateWatermarkEstimator(0), rt, Split{Subscription: sub}, emit, dead)
		if err != nil {
			t.Fatal(err)
		}
		gauges = gaugeValues(t, ctx)
		_, res, _ := rt.TrySplit(0)
		rest = res.(Restriction)
		if len(seen) < 3 {
			time.Sleep(pc.ResumeDelay()) // as the runner would
		}
	}
	for i, p := range seen {
		if want := (progress{float64(9 * (i + 1)), 9000}); p != want {
			t.Errorf("progress at message %d = %+v, want %+v (bytes emitted done, the backlog bytes remaining)", i, p, want)
		}
	}
	want := map[string]int64{
		"backlog_messages." + sub.String():      3,
		"backlog_bytes." + sub.String():         9000,
		"oldest_unacked_age_ms." + sub.String(): 30000,
	}
	for name, v := range want {
		if gauges[name] != v {
			t.Errorf("the bundle's gauge %s = %d, want %d (all: %v)", name, gauges[name], v, gauges)
		}
	}
}
