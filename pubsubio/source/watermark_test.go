package source

import (
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
)

var testPolicy = watermarkPolicy{Window: time.Minute, Idle: 10 * time.Second, Lateness: 5 * time.Second}

func TestWatermarkPolicy(t *testing.T) {
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	ceiling := now.Add(-testPolicy.Lateness)
	cases := []struct {
		name string
		snap splitState
		want time.Time
	}{
		{
			"oldest recent buffered event time holds it",
			splitState{buffered: 3, listeningSince: now.Add(-time.Second), oldestRecent: now.Add(-time.Hour), newestEmitted: now.Add(-time.Minute)},
			now.Add(-time.Hour),
		},
		{
			"oldest recent buffered holds it even when idle",
			splitState{buffered: 1, listeningSince: now.Add(-30 * time.Second), oldestRecent: now.Add(-time.Hour)},
			now.Add(-time.Hour),
		},
		{
			"oldest recent buffered is capped at now minus lateness",
			splitState{buffered: 1, listeningSince: now, oldestRecent: now.Add(time.Hour)},
			ceiling,
		},
		{
			"idle: now minus lateness",
			splitState{listeningSince: now.Add(-testPolicy.Idle), newestEmitted: now.Add(-time.Hour)},
			ceiling,
		},
		{
			"idle for long: now minus lateness",
			splitState{listeningSince: now.Add(-24 * time.Hour)},
			ceiling,
		},
		{
			"active, empty buffer: newest emitted",
			splitState{listeningSince: now.Add(-time.Second), newestEmitted: now.Add(-time.Hour)},
			now.Add(-time.Hour),
		},
		{
			"active, empty buffer: newest emitted capped at now minus lateness",
			splitState{listeningSince: now.Add(-time.Second), newestEmitted: now.Add(-time.Second)},
			ceiling,
		},
		{
			"active, nothing emitted yet: no candidate",
			splitState{listeningSince: now.Add(-time.Second)},
			time.Time{},
		},
	}
	for _, c := range cases {
		if got := testPolicy.next(now, c.snap); !got.Equal(c.want) {
			t.Errorf("%s: next = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestWatermarkEstimatorIsMonotone(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	e := &watermarkEstimator{state: base.UnixMilli()}
	steps := []struct {
		advance time.Time
		want    time.Time
	}{
		{base.Add(time.Second), base.Add(time.Second)},
		{base, base.Add(time.Second)},                          // back: ignored
		{time.Time{}, base.Add(time.Second)},                   // no candidate: ignored
		{base.Add(time.Second), base.Add(time.Second)},         // same
		{base.Add(3 * time.Second), base.Add(3 * time.Second)}, // forward
		{base.Add(2 * time.Second), base.Add(3 * time.Second)}, // back again
	}
	for i, s := range steps {
		e.advance(s.advance)
		if got := e.CurrentWatermark(); !got.Equal(s.want) {
			t.Errorf("step %d: advance(%v) -> watermark %v, want %v", i, s.advance, got, s.want)
		}
	}
	e.finish()
	if got, want := e.CurrentWatermark(), mtime.MaxTimestamp.ToTime(); !got.Equal(want) {
		t.Errorf("after finish: watermark %v, want the end of time %v", got, want)
	}
	e.advance(base.Add(time.Hour))
	if got, want := e.CurrentWatermark(), mtime.MaxTimestamp.ToTime(); !got.Equal(want) {
		t.Errorf("advance after finish moved the watermark back to %v", got)
	}
}

// The policy fed from a split reader's snapshot with a hand-moved clock:
// the watermark follows what is buffered, then what was emitted, then idles
// forward, and never goes back.
func TestWatermarkFromSplitReader(t *testing.T) {
	cfg := testConfig(t, func(c *Config) {
		c.WatermarkWindow = time.Minute
		c.WatermarkIdle = 10 * time.Second
		c.WatermarkLateness = 5 * time.Second
	})
	h := newReaderHarness(t, cfg)
	policy := watermarkPolicy{Window: cfg.WatermarkWindow, Idle: cfg.WatermarkIdle, Lateness: cfg.WatermarkLateness}
	e := &watermarkEstimator{state: mtime.MinTimestamp.Milliseconds()}
	step := func(what string, want time.Time) {
		t.Helper()
		now := h.clock.now()
		e.advance(policy.next(now, state(h.r, now.Add(-cfg.WatermarkWindow))))
		if got := e.CurrentWatermark(); !got.Equal(want) {
			t.Errorf("%s: watermark %v, want %v", what, got, want)
		}
	}
	t0 := h.clock.now()
	run := h.poll()

	// A backlog arrives: event times an hour old, oldest first but not all
	// in order.
	deliverTo(h.r, run, &pubsub.Message{ID: "a", PublishTime: t0.Add(-time.Hour)}, &fakeHandle{}, "ack-a")
	deliverTo(h.r, run, &pubsub.Message{ID: "b", PublishTime: t0.Add(-2 * time.Hour)}, &fakeHandle{}, "ack-b")
	deliverTo(h.r, run, &pubsub.Message{ID: "c", PublishTime: t0.Add(-30 * time.Minute)}, &fakeHandle{}, "ack-c")
	step("oldest buffered holds it", t0.Add(-2*time.Hour))

	// Emitting b leaves a at the head.
	h.clock.advance(time.Second)
	drained := drain(h.r, 3, 0)
	for _, d := range drained {
		h.r.endBundle(nil, d.eventTime, time.Time{})
	}
	step("active, empty buffer: newest emitted", t0.Add(-30*time.Minute))

	// A message arrives from before the watermark: it cannot pull it back.
	deliverTo(h.r, run, &pubsub.Message{ID: "late", PublishTime: t0.Add(-3 * time.Hour)}, &fakeHandle{}, "ack-late")
	step("late arrival does not move it back", t0.Add(-30*time.Minute))

	// Buffered for longer than the window: no longer holds the watermark.
	drain(h.r, 10, 1)
	h.clock.advance(2 * time.Minute)
	now := h.clock.now()
	step("idle: now minus lateness", now.Add(-5*time.Second))

	h.clock.advance(time.Minute)
	now = h.clock.now()
	step("idle keeps advancing", now.Add(-5*time.Second))
}

// A buffered message that arrived before the window no longer holds the
// watermark; one that arrived within it does.
func TestSnapshotOldestRecentRespectsWindow(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	t0 := h.clock.now()
	deliverTo(h.r, run, &pubsub.Message{ID: "old", PublishTime: t0.Add(-time.Hour)}, &fakeHandle{}, "ack-old")
	h.clock.advance(2 * time.Minute)
	deliverTo(h.r, run, &pubsub.Message{ID: "new", PublishTime: t0.Add(-time.Minute)}, &fakeHandle{}, "ack-new")
	now := h.clock.now()

	s := state(h.r, now.Add(-time.Minute))
	if !s.oldestRecent.Equal(t0.Add(-time.Minute)) {
		t.Errorf("oldestRecent %v, want %v (the message outside the window must not count)", s.oldestRecent, t0.Add(-time.Minute))
	}
	if s.buffered != 2 || !s.listeningSince.Equal(now) {
		t.Errorf("snapshot %+v: want 2 buffered, last arrival %v", s, now)
	}
	s = state(h.r, now.Add(-time.Hour))
	if !s.oldestRecent.Equal(t0.Add(-time.Hour)) {
		t.Errorf("with a wider window: oldestRecent %v, want %v", s.oldestRecent, t0.Add(-time.Hour))
	}
}
