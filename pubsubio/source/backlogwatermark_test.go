package source

import (
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/backlog"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// heldSub is the subscription of the hold tests.
var heldSub = model.SubscriptionOf(testProject, "held")

// holdWatch is a watch of heldSub on a sampler that never runs, whose
// sample the test sets; watched at at.
func holdWatch(at time.Time) *backlogWatch {
	s := newBacklogSampler(connection.Settings{}, time.Minute, time.Now)
	s.users = 1 // the split's, released with it
	s.watch(heldSub, at)
	return &backlogWatch{s: s, sub: heldSub}
}

// answer records sample as the sampler's answer for heldSub.
func (w *backlogWatch) answer(sample backlog.Sample) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	e := w.s.subs[heldSub]
	e.done, e.sample = true, sample
}

func TestBacklogHold(t *testing.T) {
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	sampled := now.Add(-2 * time.Minute) // as stale as Monitoring is
	c := now.Add(-time.Second)           // what the arrivals say
	const maxOutage = 5 * time.Minute
	old := sampleAt(sampled, 100, 1000, 10*time.Minute) // oldest published 12 minutes ago
	oldest := sampled.Add(-10 * time.Minute)
	cases := []struct {
		name   string
		sample *backlog.Sample // nil: no answer yet
		at     time.Time       // when the bundle ends
		prev   time.Time       // the split's last estimate
		want   time.Time
	}{
		{"before the first answer: wait", nil, now, time.Time{}, time.Time{}},
		{"no answer after WatermarkIdle: the arrivals", nil, now.Add(testPolicy.Idle), time.Time{}, c},
		{"an old oldest message holds", &old, now, time.Time{}, oldest},
		{"it holds at the split's own estimate", &old, now, oldest, oldest},
		{"not once the estimate passed it", &old, now, oldest.Add(time.Millisecond), c},
		{"a young oldest message does not hold", ptr(sampleAt(sampled, 100, 1000, testPolicy.Window-time.Second)), now, time.Time{}, c},
		{"exactly WatermarkWindow old holds", ptr(sampleAt(sampled, 100, 1000, testPolicy.Window)), now, time.Time{}, sampled.Add(-testPolicy.Window)},
		{"a sample WatermarkMaxOutage old holds nothing", ptr(sampleAt(now.Add(-maxOutage), 100, 1000, time.Hour)), now, time.Time{}, c},
		{"no age in the sample", &backlog.Sample{Messages: backlog.Point{Value: 5, At: sampled}}, now, time.Time{}, c},
	}
	for _, tc := range cases {
		w := holdWatch(now)
		if tc.sample != nil {
			w.answer(*tc.sample)
		}
		cand := c
		if tc.at.After(now) {
			cand = tc.at.Add(-time.Second)
			if !tc.want.IsZero() {
				tc.want = cand
			}
		}
		if got := w.hold(cand, tc.prev, tc.at, testPolicy, maxOutage); !got.Equal(tc.want) {
			t.Errorf("%s: hold = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// One message holds for at most WatermarkMaxOutage, counted once; a newer
// oldest message holds anew.
func TestBacklogHoldIsBounded(t *testing.T) {
	logs := recordLog(t)
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	const maxOutage = 5 * time.Minute
	w := holdWatch(now)
	holds, released := watermarkBacklogHolds.Load(), watermarkBacklogHoldsReleased.Load()
	stuck := sampleAt(now.Add(-time.Minute), 1, 10, time.Hour)
	oldest, _ := stuck.OldestPublished()
	w.answer(stuck)
	for i, d := range []time.Duration{0, time.Minute, maxOutage - time.Second} {
		if got := w.hold(now.Add(d), time.Time{}, now.Add(d), testPolicy, maxOutage); !got.Equal(oldest) {
			t.Fatalf("step %d: hold = %v, want the stuck message %v", i, got, oldest)
		}
		// The next sample sees the same message, fresh.
		stuck = sampleAt(now.Add(d), 1, 10, now.Add(d).Sub(oldest))
		w.answer(stuck)
	}
	at := now.Add(maxOutage)
	if got := w.hold(at, oldest, at, testPolicy, maxOutage); !got.Equal(at) {
		t.Fatalf("after WatermarkMaxOutage: hold = %v, want the arrivals' %v", got, at)
	}
	w.hold(at.Add(time.Second), oldest, at.Add(time.Second), testPolicy, maxOutage)
	if d := watermarkBacklogHolds.Load() - holds; d != 1 {
		t.Errorf("watermark_backlog_holds grew by %d, want 1", d)
	}
	if d := watermarkBacklogHoldsReleased.Load() - released; d != 1 {
		t.Errorf("watermark_backlog_holds_released grew by %d, want 1", d)
	}
	if n := len(logs.matching("has held the watermark for WatermarkMaxOutage")); n != 1 {
		t.Errorf("%d log lines for the release, want 1", n)
	}

	// The stuck message is gone; an older backlog behind a newer oldest
	// message holds again.
	next := at.Add(time.Minute)
	w.answer(sampleAt(next, 1, 10, 2*time.Minute))
	if got, want := w.hold(next, oldest, next, testPolicy, maxOutage), next.Add(-2*time.Minute); !got.Equal(want) {
		t.Errorf("a new oldest message: hold = %v, want %v", got, want)
	}
}

// The hold in a bundle: a split whose arrivals look caught up reports the
// oldest unacked message's publish time; with event times from an
// attribute the sample says nothing and the arrivals decide.
func TestBundleEndHeldByTheBacklog(t *testing.T) {
	for _, attr := range []string{"", "ts"} {
		h := newReaderHarness(t, testConfig(t, func(c *Config) { c.TimestampAttribute = attr }))
		w := holdWatch(h.clock.now())
		h.r.backlog = w
		run := h.poll()
		m := msg("fresh", "x")
		m.PublishTime = h.clock.now()
		deliverTo(h.r, run, m, &fakeHandle{}, "ack-fresh")

		state(h.r)
		h.r.mu.Lock()
		got := h.r.watermark
		h.r.mu.Unlock()
		if attr == "" && !got.IsZero() {
			t.Errorf("before the first sample: the split's estimate is %v, want none yet", got)
		}

		old := sampleAt(h.clock.now().Add(-2*time.Minute), 500, 5000, 20*time.Minute)
		w.answer(old)
		h.clock.advance(100 * time.Millisecond)
		state(h.r)
		h.r.mu.Lock()
		got = h.r.watermark
		h.r.mu.Unlock()
		oldest, _ := old.OldestPublished()
		arrivals := h.clock.now().Add(-h.r.cfg.WatermarkLateness)
		switch {
		case attr == "" && !got.Equal(oldest):
			t.Errorf("held: the split's estimate is %v, want the oldest unacked message's publish time %v", got, oldest)
		case attr != "" && !got.After(oldest):
			t.Errorf("event times from an attribute: the estimate is %v, want the arrivals' (about %v), not the sample's %v", got, arrivals, oldest)
		}
	}
}

func ptr[T any](v T) *T { return &v }
