package source

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
)

var testPolicy = watermarkPolicy{Window: time.Minute, Idle: 10 * time.Second, Lateness: time.Second}

func TestWatermarkPolicy(t *testing.T) {
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	listening := func(s splitState) splitState {
		s.at, s.listening, s.listenedAt = now, true, now
		return s
	}
	cases := []struct {
		name string
		s    splitState
		want time.Time
	}{
		{
			"arrivals: the clock, minus their largest lag, minus lateness",
			listening(splitState{listeningSince: now, maxLag: 300 * time.Millisecond, hasLag: true}),
			now.Add(-1300 * time.Millisecond),
		},
		{
			"a lagging subscription: the lag of its backlog",
			listening(splitState{listeningSince: now, maxLag: time.Hour, hasLag: true}),
			now.Add(-time.Hour - time.Second),
		},
		{
			"the oldest buffered message holds it",
			listening(splitState{buffered: 2, listeningSince: now, maxLag: time.Second, hasLag: true, oldestBuffered: now.Add(-time.Minute)}),
			now.Add(-time.Minute),
		},
		{
			"a buffered message newer than the estimate does not move it",
			listening(splitState{buffered: 1, listeningSince: now, maxLag: time.Second, hasLag: true, oldestBuffered: now}),
			now.Add(-2 * time.Second),
		},
		{
			"not listening: the moment it last listened, minus the lag and lateness",
			splitState{at: now, listenedAt: now.Add(-time.Minute), listeningSince: now, maxLag: time.Second, hasLag: true},
			now.Add(-time.Minute - 2*time.Second),
		},
		{
			"not listening, nothing arrived: no candidate",
			splitState{at: now, listenedAt: now.Add(-time.Minute), listeningSince: now.Add(-time.Hour)},
			time.Time{},
		},
		{
			"nothing arrived, listening for less than Idle: no candidate",
			listening(splitState{listeningSince: now.Add(-time.Second)}),
			time.Time{},
		},
		{
			"nothing arrived for Idle: now minus lateness",
			listening(splitState{listeningSince: now.Add(-testPolicy.Idle)}),
			now.Add(-testPolicy.Lateness),
		},
		{
			// A lag is never negative (intake.go), but the bound holds on its own.
			"never past the clock minus lateness",
			listening(splitState{listeningSince: now, maxLag: -time.Hour, hasLag: true}),
			now.Add(-testPolicy.Lateness),
		},
		{
			"the largest lag there is: saturates, does not wrap into the future",
			listening(splitState{listeningSince: now, maxLag: math.MaxInt64, hasLag: true}),
			now.Add(math.MinInt64 + 1),
		},
	}
	for _, c := range cases {
		if got := testPolicy.next(c.s); !got.Equal(c.want) {
			t.Errorf("%s: next = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestArrivalLagsForgetOutsideTheWindow(t *testing.T) {
	a := arrivalLags{window: 16 * time.Second} // slots of 1 s
	t0 := time.Unix(1_700_000_000, 0)
	if _, ok := a.largest(t0); ok {
		t.Fatal("an empty window reports a lag")
	}
	a.add(t0, 5*time.Second)
	a.add(t0.Add(3*time.Second), time.Second)
	if lag, ok := a.largest(t0.Add(3 * time.Second)); !ok || lag != 5*time.Second {
		t.Errorf("within the window: %v %v, want the largest, 5s", lag, ok)
	}
	if lag, ok := a.largest(t0.Add(17 * time.Second)); !ok || lag != time.Second {
		t.Errorf("16 s on the first arrival's slot is out: %v %v, want 1s", lag, ok)
	}
	if _, ok := a.largest(t0.Add(time.Minute)); ok {
		t.Error("a minute later every arrival is out of the window")
	}
	a.add(t0.Add(time.Minute), 2*time.Second) // reuses a slot of the first lap
	if lag, ok := a.largest(t0.Add(time.Minute)); !ok || lag != 2*time.Second {
		t.Errorf("a reused slot: %v %v, want only the new lag, 2s", lag, ok)
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

// A split reader's own watermark with a hand-moved clock: it trails the
// arrivals by their lag, holds at what is buffered and at what was given
// back and not seen again, and stands still while the subscriber is
// stopped.
func TestWatermarkFromSplitReader(t *testing.T) {
	cfg := testConfig(t, func(c *Config) {
		c.WatermarkWindow = time.Minute
		c.WatermarkIdle = 10 * time.Second
		c.WatermarkLateness = time.Second
	})
	h := newReaderHarness(t, cfg)
	step := func(what string, want time.Time) {
		t.Helper()
		state(h.r)
		h.r.mu.Lock()
		got := h.r.watermark
		h.r.mu.Unlock()
		if !got.Equal(want) {
			t.Errorf("%s: watermark %v, want %v", what, got, want)
		}
	}
	t0 := h.clock.now()
	run := h.poll()
	step("nothing arrived yet: none", time.Time{})

	// Messages published 200 and 100 ms before they arrive.
	deliverTo(h.r, run, &pubsub.Message{ID: "a", PublishTime: t0.Add(-200 * time.Millisecond)}, &fakeHandle{}, "ack-a")
	deliverTo(h.r, run, &pubsub.Message{ID: "b", PublishTime: t0.Add(-100 * time.Millisecond)}, &fakeHandle{}, "ack-b")
	step("the clock minus the largest lag and lateness", t0.Add(-1200*time.Millisecond))
	h.clock.advance(5 * time.Second)
	step("still buffered: a holds it", t0.Add(-200*time.Millisecond))
	emitted := drain(h.r, 10, 0)
	step("emitted: it follows the clock", t0.Add(5*time.Second-1200*time.Millisecond))

	// A bundle failed on a gives it back, and keeps b for the retry: until a
	// arrives again, its event time holds it.
	h.r.abandonBundle(0, emitted[0])
	h.clock.advance(5 * time.Second)
	step("given back, not seen again: held", t0.Add(-200*time.Millisecond))
	deliverTo(h.r, run, &pubsub.Message{ID: "a", PublishTime: t0.Add(-200 * time.Millisecond)}, &fakeHandle{}, "ack-a2")
	deliverTo(h.r, run, &pubsub.Message{ID: "b", PublishTime: t0.Add(-100 * time.Millisecond)}, &fakeHandle{}, "ack-b2")
	drain(h.r, 10, 1)
	step("back and emitted: the clock minus the redelivery's lag", t0.Add(-1200*time.Millisecond))

	// Stopped at the budget: it does not move however long the stop.
	h.r.mu.Lock()
	h.r.stopLocked(nackedBudget)
	h.r.mu.Unlock()
	h.clock.advance(time.Hour)
	step("stopped: still", t0.Add(-1200*time.Millisecond))
}

// Every split of a read reports the lowest watermark of the read's splits
// in the process: a runner that takes the latest checkpoint's estimate for
// the stage must not see a fast split's.
func TestReadReportsItsSlowestSplit(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := testConfig(t, func(c *Config) { c.Subscriptions = testSubs(2) })
	fast, _ := h.g.reader(splitKey{read: "r", index: 0}, Split{Index: 0, Subscription: cfg.Subscriptions[0]}, cfg)
	slow, _ := h.g.reader(splitKey{read: "r", index: 1}, Split{Index: 1, Subscription: cfg.Subscriptions[1]}, cfg)
	t.Cleanup(func() { h.g.detach("r") })
	t0 := h.clock.now()
	set := func(r *splitReader, w time.Time) {
		r.mu.Lock()
		r.watermark = w
		r.mu.Unlock()
	}
	set(fast, t0)
	set(slow, t0.Add(-time.Hour))
	if got := h.g.watermark("r"); !got.Equal(t0.Add(-time.Hour)) {
		t.Errorf("watermark %v, want the slow split's %v", got, t0.Add(-time.Hour))
	}
	set(slow, t0.Add(time.Minute))
	if got := h.g.watermark("r"); !got.Equal(t0) {
		t.Errorf("watermark %v, want the now slower fast split's %v", got, t0)
	}
	if got := h.g.watermark("other"); !got.IsZero() {
		t.Errorf("an unknown read's watermark %v, want none", got)
	}
}

func TestGivenBackHoldsUntilSeenOrExpired(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	g := newGivenBack(time.Minute, newStats())
	sub := testSubs(1)[0]
	if got := g.oldest(t0); !got.IsZero() {
		t.Fatalf("empty: %v", got)
	}
	g.add("a", sub, t0.Add(-time.Hour), t0)
	g.add("b", sub, t0.Add(-2*time.Hour), t0.Add(30*time.Second))
	if got := g.oldest(t0.Add(30 * time.Second)); !got.Equal(t0.Add(-2 * time.Hour)) {
		t.Errorf("oldest %v, want b's", got)
	}
	g.seen("b")
	if got := g.oldest(t0.Add(30 * time.Second)); !got.Equal(t0.Add(-time.Hour)) {
		t.Errorf("after b came back: %v, want a's", got)
	}
	if got := g.oldest(t0.Add(time.Minute)); !got.IsZero() {
		t.Errorf("a minute after a was given back: %v, want none (expired)", got)
	}
	g.add("c", sub, t0, t0)
	g.add("c", sub, t0.Add(time.Second), t0.Add(time.Second)) // given back again
	if got := g.oldest(t0.Add(time.Second)); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("given back twice: %v, want the latest give-back's event time", got)
	}
}

// A split awaits what the read gave back of its own subscription only,
// from the give-back until it is seen again.
func TestGivenBackAwaitedPerSubscription(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	g := newGivenBack(time.Minute, newStats())
	subs := testSubs(2)
	g.add("a", subs[0], t0, t0)
	if !g.awaits(subs[0], t0.Add(-time.Second)) {
		t.Error("a message of sub-0 given back after the time asked about is not awaited")
	}
	if g.awaits(subs[1], t0.Add(-time.Second)) {
		t.Error("sub-1 awaits a message of sub-0")
	}
	if g.awaits(subs[0], t0) {
		t.Error("a give-back is awaited from before it happened")
	}
	g.seen("a")
	if g.awaits(subs[0], t0.Add(-time.Second)) {
		t.Error("a message seen again is still awaited")
	}
}

// watermarkOf is r's own watermark at its latest bundle.
func watermarkOf(r *splitReader) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.watermark
}

// One message stamped an hour ahead of the clock (a producer with a skewed
// clock) must not move a quiet split's watermark past the clock: it would
// stay there, monotone, and every on-time message of the next hour would
// be late.
func TestWatermarkNeverPassesTheClock(t *testing.T) {
	cfg := testConfig(t, func(c *Config) { c.TimestampAttribute = "ts" })
	h := newReaderHarness(t, cfg)
	run := h.poll()
	t0 := h.clock.now()
	ahead := strconv.FormatInt(t0.Add(time.Hour).UnixMilli(), 10)
	deliverTo(h.r, run, &pubsub.Message{ID: "ahead", PublishTime: t0, Attributes: map[string]string{"ts": ahead}}, &fakeHandle{}, "ack-ahead")
	drain(h.r, 10, 0)
	for range 30 {
		state(h.r)
		if w, limit := watermarkOf(h.r), h.clock.now().Add(-cfg.WatermarkLateness); w.After(limit) {
			t.Fatalf("watermark %v, past now minus WatermarkLateness %v", w, limit)
		}
		h.clock.advance(time.Second)
	}
}

// A message at Beam's minimum timestamp (what Write(TimestampAttribute)
// stamps on such an element) is read as one: its lag, the largest there
// is, must saturate, not wrap the watermark into the year 2316.
func TestWatermarkSurvivesTheMinimumTimestamp(t *testing.T) {
	cfg := testConfig(t, func(c *Config) { c.TimestampAttribute = "ts" })
	h := newReaderHarness(t, cfg)
	run := h.poll()
	min := strconv.FormatInt(mtime.MinTimestamp.Milliseconds(), 10)
	deliverTo(h.r, run, &pubsub.Message{ID: "min", PublishTime: h.clock.now(), Attributes: map[string]string{"ts": min}}, &fakeHandle{}, "ack-min")
	batch := drain(h.r, 10, 0)
	if len(batch) != 1 || batch[0].err != nil || !batch[0].eventTime.Equal(mtime.MinTimestamp.ToTime()) {
		t.Fatalf("the message at the minimum timestamp: %d drained, want it decoded at %v", len(batch), mtime.MinTimestamp.ToTime())
	}
	for range 3 {
		state(h.r)
		if w, limit := watermarkOf(h.r), h.clock.now().Add(-cfg.WatermarkLateness); w.IsZero() || w.After(limit) {
			t.Fatalf("watermark %v, want one set and not past %v", w, limit)
		}
		h.clock.advance(time.Second)
	}
}

// Under a load at the read's capacity the client refills the flow-control
// window as soon as a bundle's acks free it, so every bundle ends with the
// window full. The watermark must still follow what arrives: 600 bundles
// over 10 minutes of a backlog two seconds old.
func TestWatermarkMovesUnderSustainedLoad(t *testing.T) {
	const window = 100
	cfg := testConfig(t, func(c *Config) { c.MaxOutstandingMessages = window })
	h := newReaderHarness(t, cfg)
	run := h.poll()
	n := 0
	refill := func() {
		h.r.mu.Lock()
		held := h.r.ledger.buffered + len(h.r.ledger.pending)
		h.r.mu.Unlock()
		for ; held < window; held++ {
			id := fmt.Sprint("m", n)
			n++
			deliverTo(h.r, run, &pubsub.Message{ID: id, PublishTime: h.clock.now().Add(-2 * time.Second)}, &fakeHandle{}, "ack-"+id)
		}
	}
	var emitted []string
	for bundle := range 600 {
		ack(h.r, emitted)
		refill()
		emitted = ackIDsOf(drain(h.r, window, int64(bundle)))
		h.clock.advance(500 * time.Millisecond)
		if s := state(h.r); s.listening {
			t.Fatalf("bundle %d ended listening with a full window", bundle)
		}
		h.clock.advance(500 * time.Millisecond)
	}
	want := h.clock.now().Add(-time.Second - 2*time.Second - cfg.WatermarkLateness)
	if got := watermarkOf(h.r); got.Before(want) {
		t.Errorf("after 600 bundles with the window full at each end: watermark %v, want at least %v (the last arrival, minus its lag and lateness)", got, want)
	}
}

// A split whose window was full for longer than WatermarkIdle (its bundles
// committed slowly) and then has room again must not look idle at once:
// the server may have waited all along to send it a backlog.
func TestWatermarkNotIdleRightAfterAFullWindow(t *testing.T) {
	cfg := testConfig(t, func(c *Config) { c.MaxOutstandingMessages = 1 })
	h := newReaderHarness(t, cfg)
	run := h.poll()
	deliverTo(h.r, run, &pubsub.Message{ID: "a", PublishTime: h.clock.now()}, &fakeHandle{}, "ack-a")
	emitted := ackIDsOf(drain(h.r, 1, 0))
	for range 3 {
		h.clock.advance(cfg.WatermarkWindow) // the arrival's lag is forgotten
		state(h.r)
	}
	before := watermarkOf(h.r)
	ack(h.r, emitted)
	if s := state(h.r); !s.listening {
		t.Fatal("room again, but not listening")
	}
	if got := watermarkOf(h.r); !got.Equal(before) {
		t.Errorf("the first bundle with room again moved the watermark from %v to %v, as if idle", before, got)
	}
}

// Given-back messages that do not hold the watermark are counted: past
// maxGivenBack, and those not seen again within the hold (most likely
// redelivered to another worker, where nothing holds the watermark for
// them).
func TestGivenBackCountsWhatItCannotHold(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := newStats()
	g := newGivenBack(time.Minute, s)
	for i := range maxGivenBack + 3 {
		g.add(strconv.Itoa(i), testSubs(1)[0], t0, t0)
	}
	if got := s.get(givenBackUntracked); got != 3 {
		t.Errorf("given_back_untracked = %d, want 3", got)
	}
	g.seen("0")
	g.oldest(t0.Add(time.Minute))
	if got := s.get(givenBackUnseen); got != maxGivenBack-1 {
		t.Errorf("given_back_unseen = %d, want %d (all but the one seen again)", got, maxGivenBack-1)
	}
}

// A message that arrives behind the split's watermark (here one at Beam's
// minimum timestamp) is late whatever the watermark does next; its lag
// must not stall the watermark for WatermarkWindow, only by up to
// WatermarkLateness, as a message just late would.
func TestLateArrivalStallsTheWatermarkOnlyBriefly(t *testing.T) {
	cfg := testConfig(t, func(c *Config) { c.TimestampAttribute = "ts" })
	h := newReaderHarness(t, cfg)
	run := h.poll()
	stamp := func(id string, at time.Time) {
		deliverTo(h.r, run, &pubsub.Message{ID: id, PublishTime: h.clock.now(), Attributes: map[string]string{"ts": strconv.FormatInt(at.UnixMilli(), 10)}}, &fakeHandle{}, "ack-"+id)
		drain(h.r, 10, 0)
		state(h.r)
	}
	stamp("on-time", h.clock.now().Add(-100*time.Millisecond))
	before := watermarkOf(h.r)
	h.clock.advance(100 * time.Millisecond)
	stamp("minimum", mtime.MinTimestamp.ToTime())
	h.clock.advance(cfg.WatermarkLateness + 100*time.Millisecond)
	stamp("next", h.clock.now().Add(-100*time.Millisecond))
	if got := watermarkOf(h.r); !got.After(before) {
		t.Errorf("WatermarkLateness after a message at the minimum timestamp: watermark %v, not past %v from before it", got, before)
	}
}
