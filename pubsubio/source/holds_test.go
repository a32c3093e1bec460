package source

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	beammetrics "github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics/metricstest"
)

// What a split holds for MaxExtension without a commit (emitted and not
// acked, buffered, withheld) is given back by the janitor, counted in
// messages_nacked_hold, while what arrived later stays; the read's oldest
// hold is reported as held_oldest_age_ms, and a hold past half of
// MaxExtension is warned about once.
func TestHoldsBoundedByMaxExtension(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := registryConfig(t, func(c *Config) {
		c.MaxExtension, c.BufferMaxMessages, c.MaxOutstandingMessages = 10*time.Minute, 3, 1000
	})
	key := splitKey{read: "holds", index: 0}
	r, rs := h.g.reader(key, planSplits(cfg.Subscriptions, cfg.Ordering, 1)[0], cfg)
	t.Cleanup(func() { h.g.detach("holds") })
	r.budgetWait = 0
	run := pollRun(t, r)
	h.conn(0).nextReceive(t)
	old := deliverN(r, run, "old", 3)
	drain(r, 1, 0) // old0 pending
	for i := 3; i < 5; i++ {
		old = append(old, &fakeHandle{})
		deliverTo(r, run, msg(fmt.Sprint("old", i), "x"), old[i], fmt.Sprint("ack-old", i))
	}
	if got := withheldIDs(t, r); len(got) != 1 { // the budget holds 3
		t.Fatalf("withheld %v, want old4", got)
	}

	h.clock.advance(6 * time.Minute)
	young := deliverN(r, run, "young", 1)
	pollRun(t, r) // polled: not idle
	h.g.releaseIdle()
	for i, fh := range old {
		fh.check(t, fmt.Sprintf("old%d held for 6 min", i), 0, 0)
	}
	if !rs.holds.warned.Load() {
		t.Error("a hold past half of MaxExtension was not warned about")
	}
	ctx := metricstest.BundleContext()
	rs.holds.report(ctx, h.clock.now())
	if got := gaugeValue(t, ctx, "held_oldest_age_ms"); got != (6 * time.Minute).Milliseconds() {
		t.Errorf("held_oldest_age_ms %d, want 6 min", got)
	}

	h.clock.advance(4 * time.Minute) // old* held for MaxExtension
	pollRun(t, r)
	h.g.releaseIdle()
	for i, fh := range old {
		fh.check(t, fmt.Sprintf("old%d held for MaxExtension", i), 0, 1)
	}
	young[0].check(t, "young0, held for 4 min", 0, 0)
	if got := rs.stats.get(nackedHold); got != 5 {
		t.Errorf("messages_nacked_hold %d, want 5", got)
	}
	if got := withheldIDs(t, r); len(got) != 1 || got[0] != "young0" {
		t.Errorf("withheld %v after the hold bound, want [young0], withheld behind old4", got)
	}
	if back := rs.givenBack.oldest(h.clock.now()); !back.Equal(msg("", "").PublishTime) {
		t.Errorf("given back oldest event time %v, want the messages' %v: the watermark waits for them", back, msg("", "").PublishTime)
	}
	rs.holds.report(ctx, h.clock.now())
	if got := gaugeValue(t, ctx, "held_oldest_age_ms"); got != (4 * time.Minute).Milliseconds() {
		t.Errorf("held_oldest_age_ms %d after the give-back, want young0's 4 min", got)
	}
}

// A MaxExtension under LeaseIdle is warned about at construction.
func TestHoldWarning(t *testing.T) {
	if w := testConfig(t, nil).holdWarnings(); len(w) != 0 {
		t.Errorf("defaults: %q, want no warning", w)
	}
	w := testConfig(t, func(c *Config) { c.MaxExtension, c.LeaseIdle = time.Minute, 2*time.Minute }).holdWarnings()
	if len(w) != 1 || !strings.Contains(w[0], "MaxExtension 1m0s is under LeaseIdle 2m0s") {
		t.Errorf("warnings %q, want one naming MaxExtension and LeaseIdle", w)
	}
}

// gaugeValue returns the pubsubio gauge name set with ctx.
func gaugeValue(t *testing.T, ctx context.Context, name string) int64 {
	t.Helper()
	var got int64
	err := beammetrics.Extractor{GaugeInt64: func(l beammetrics.Labels, v int64, _ time.Time) {
		if l.Name() == name {
			got = v
		}
	}}.ExtractFrom(beammetrics.GetStore(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return got
}
