package source

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// registryHarness is a registry with a hand-moved clock whose dial hands
// out one fakePuller per split index.
type registryHarness struct {
	t     *testing.T
	g     *registry
	clock *fakeClock

	mu    sync.Mutex
	subs  map[int]*fakePuller
	dials map[int]int
}

func newRegistryHarness(t *testing.T) *registryHarness {
	h := &registryHarness{t: t, clock: newFakeClock(), subs: map[int]*fakePuller{}, dials: map[int]int{}}
	h.g = newRegistry(h.clock.now, func(_ context.Context, s Split, _ Config, _ *givenBack) (puller, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.dials[s.Index]++
		sub := newFakePuller()
		h.subs[s.Index] = sub
		return sub, nil
	})
	return h
}

// conn returns the latest puller dialed for split index.
func (h *registryHarness) conn(index int) *fakePuller {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[index]
	if s == nil {
		h.t.Fatalf("split %d never dialed", index)
	}
	return s
}

// pollOne starts split 0 of cfg under key, released when the test ends,
// and returns its reader, its receive and the receive's context.
func (h *registryHarness) pollOne(key splitKey, cfg Config) (*splitReader, *receiveRun, context.Context) {
	h.t.Helper()
	r, _ := h.g.reader(key, planSplits(cfg.Subscriptions, cfg.Ordering, 1)[0], cfg)
	h.t.Cleanup(func() { r.release(nackedRelease) })
	run := pollRun(h.t, r)
	return r, run, h.conn(0).nextReceive(h.t)
}

// registryConfig keeps LeaseIdle long, so the registry's own janitor (which
// ticks at a quarter of it, in real time) never fires during a test: only
// the test's releaseIdle calls, with the hand-moved clock, release. Its
// MaxExtension, the hold bound, is longer than the tests move the clock.
func registryConfig(t *testing.T, edit func(*Config)) Config {
	return testConfig(t, func(c *Config) {
		c.Subscriptions = testSubs(2)
		c.LeaseIdle, c.MaxExtension = time.Hour, 24*time.Hour
		if edit != nil {
			edit(c)
		}
	})
}

func TestRegistryReleasesIdleSplits(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := registryConfig(t, nil)
	plan := planSplits(cfg.Subscriptions, cfg.Ordering, 2)
	keyA, keyB := splitKey{read: "read-1", index: 0}, splitKey{read: "read-1", index: 1}
	rA, rsA := h.g.reader(keyA, plan[0], cfg)
	rB, rsB := h.g.reader(keyB, plan[1], cfg)
	t.Cleanup(func() { releaseAll([]*splitReader{rA, rB}, nackedRelease) })
	if rsA != rsB {
		t.Fatal("two splits of one read got different read states")
	}
	runA, runB := pollRun(t, rA), pollRun(t, rB)
	ctxA, ctxB := h.conn(0).nextReceive(t), h.conn(1).nextReceive(t)
	heldA := deliverN(rA, runA, "a", 3)
	heldB := deliverN(rB, runB, "b", 2)
	drain(rA, 1, 0) // a0 pending, a1 and a2 buffered
	drain(rB, 1, 0)

	h.clock.advance(40 * time.Minute)
	pollRun(t, rB) // B is still polled, A is not
	h.clock.advance(30 * time.Minute)
	h.g.releaseIdle() // A idle for 70 min, B for 30 min; LeaseIdle 60 min

	for i, fh := range heldA {
		fh.check(t, fmt.Sprintf("a%d held by the idle split", i), 0, 1)
	}
	if got := rsA.stats.get(nackedRelease); got != 3 {
		t.Errorf("messages_nacked_release = %d, want 3", got)
	}
	awaitDone(t, "idle split A", ctxA)
	if got := h.conn(0).closeCount(); got != 1 {
		t.Errorf("split A's subscription closed %d times, want 1", got)
	}
	for i, fh := range heldB {
		fh.check(t, fmt.Sprintf("b%d held by the polled split", i), 0, 0)
	}
	if isDone(ctxB) {
		t.Error("the polled split B was stopped")
	}

	// The released split starts afresh when its next bundle comes.
	if r, _ := h.g.reader(keyA, plan[0], cfg); r == rA {
		t.Error("the registry still hands out the released reader of split A")
	}
	if r, _ := h.g.reader(keyB, plan[1], cfg); r != rB {
		t.Error("the registry replaced split B's reader")
	}

	// Once B is idle too, it goes (the lookup above counted as use).
	h.clock.advance(61 * time.Minute)
	h.g.releaseIdle()
	for i, fh := range heldB {
		fh.check(t, fmt.Sprintf("b%d after B went idle", i), 0, 1)
	}
	awaitDone(t, "idle split B", ctxB)
}

func TestRegistryDoesNotReleaseBeforeLeaseIdle(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := registryConfig(t, nil)
	key := splitKey{read: "read-1", index: 0}
	r, run, ctx := h.pollOne(key, cfg)
	held := deliverN(r, run, "m", 1)

	h.clock.advance(cfg.LeaseIdle) // exactly LeaseIdle: not yet
	h.g.releaseIdle()
	held[0].check(t, "message of a split idle for exactly LeaseIdle", 0, 0)
	if isDone(ctx) {
		t.Error("released at exactly LeaseIdle")
	}
	if got, _ := h.g.reader(key, Split{}, cfg); got != r {
		t.Error("the reader was replaced")
	}
}

// A split whose bundle runs longer than LeaseIdle (a stage fused after the
// read stalls in it) is in use, not idle: nothing it holds is given back,
// since the bundle needs it when it ends. LeaseIdle counts from the end.
func TestRegistryDoesNotReleaseASplitWhileItsBundleRuns(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := registryConfig(t, nil)
	r, run, ctx := h.pollOne(splitKey{read: "read-1", index: 0}, cfg)
	held := deliverN(r, run, "m", 2)
	batch, err := r.beginBundle(context.Background(), Restriction{Owner: processID}, 1)
	if err != nil || len(batch) != 1 {
		t.Fatalf("beginBundle: %d deliveries, %v; want 1", len(batch), err)
	}

	h.clock.advance(3 * cfg.LeaseIdle)
	h.g.releaseIdle()
	for i, fh := range held {
		fh.check(t, fmt.Sprintf("m%d while the bundle runs", i), 0, 0)
	}
	if isDone(ctx) {
		t.Error("the split was released while its bundle ran")
	}

	r.endBundle(nil, cfg.watermarkPolicy())
	h.clock.advance(cfg.LeaseIdle)
	h.g.releaseIdle()
	held[1].check(t, "m1 LeaseIdle after the bundle ended", 0, 0)
	h.clock.advance(time.Millisecond)
	h.g.releaseIdle()
	for i, fh := range held {
		fh.check(t, fmt.Sprintf("m%d once idle after the bundle", i), 0, 1)
	}
	awaitDone(t, "the split idle after its bundle", ctx)
}

// The buffer budget is per read per process: two splits of one read share
// it, a split of another read does not.
func TestBudgetSharedBySplitsOfOneRead(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := registryConfig(t, func(c *Config) { c.BufferMaxMessages = 2 })
	plan := planSplits(cfg.Subscriptions, cfg.Ordering, 2)
	rA, rsA := h.g.reader(splitKey{read: "read-1", index: 0}, plan[0], cfg)
	rB, rsB := h.g.reader(splitKey{read: "read-1", index: 1}, plan[1], cfg)
	rOther, rsOther := h.g.reader(splitKey{read: "read-2", index: 1}, plan[1], cfg)
	t.Cleanup(func() { releaseAll([]*splitReader{rA, rB, rOther}, nackedRelease) })
	if rsA != rsB || rA.budget != rB.budget {
		t.Fatal("two splits of one read do not share a budget")
	}
	if rsOther == rsA || rOther.budget == rA.budget {
		t.Fatal("two reads share a budget")
	}

	rB.budgetWait = 0 // B's crossing delivery is withheld at once
	runA, runB := pollRun(t, rA), pollRun(t, rB)
	ctxA, ctxB := h.conn(0).nextReceive(t), h.conn(1).nextReceive(t)
	runOther := pollRun(t, rOther)
	heldA := deliverN(rA, runA, "a", 2) // fills the read's budget

	over := &fakeHandle{}
	deliverTo(rB, runB, msg("b0", "x"), over, "ack-b0")
	if got := withheldIDs(t, rB); !cmp.Equal(got, []string{"b0"}) {
		t.Errorf("split B withholds %v, want [b0]", got)
	}
	over.check(t, "split B's delivery crossing the shared budget, withheld", 0, 0)
	if isDone(ctxA) || isDone(ctxB) {
		t.Error("a split was stopped at the budget")
	}
	for i, fh := range heldA {
		fh.check(t, fmt.Sprintf("a%d", i), 0, 0)
	}

	// Another read has its own budget.
	other := &fakeHandle{}
	deliverTo(rOther, runOther, msg("o0", "x"), other, "ack-o0")
	other.check(t, "another read's delivery", 0, 0)

	// Draining A frees the shared budget; B's next bundle gives back what
	// it withheld, and its deliveries fit again.
	drain(rA, 10, 0)
	if got := drain(rB, 10, 0); len(got) != 0 {
		t.Errorf("split B drained %v, want nothing", ackIDsOf(got))
	}
	over.check(t, "split B's withheld delivery after B's next bundle", 0, 1)
	if got := rsA.stats.get(nackedBudget); got != 1 {
		t.Errorf("messages_nacked_budget = %d, want 1", got)
	}
	fits := &fakeHandle{}
	deliverTo(rB, runB, msg("b1", "x"), fits, "ack-b1")
	fits.check(t, "split B's delivery after A drained", 0, 0)
	if got := ackIDsOf(drain(rB, 10, 1)); len(got) != 1 || got[0] != "ack-b1" {
		t.Errorf("split B drained %v, want [ack-b1]", got)
	}
	if got := rsA.stats.get(subscriberRestarts); got != 0 {
		t.Errorf("subscriber_restarts = %d, want 0", got)
	}
}

func TestRegistryDetachReleasesWithLastUser(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := registryConfig(t, nil)
	h.g.attach("read-1", cfg)
	h.g.attach("read-1", cfg)
	r, _ := h.g.reader(splitKey{read: "read-1", index: 0}, planSplits(cfg.Subscriptions, cfg.Ordering, 1)[0], cfg)
	t.Cleanup(func() { r.release(nackedRelease) })
	run := pollRun(t, r)
	ctx := h.conn(0).nextReceive(t)
	held := deliverN(r, run, "m", 1)

	h.g.detach("read-1")
	held[0].check(t, "after the first of two instances detached", 0, 0)
	if isDone(ctx) {
		t.Error("released while an instance remains")
	}
	h.g.detach("read-1")
	held[0].check(t, "after the last instance detached", 0, 1)
	awaitDone(t, "last instance detached", ctx)
	h.g.detach("read-1") // detaching an unknown read is harmless
}

// A split that has no estimate of its own holds the read's watermark in
// the process (it may yet receive old messages), but only for WatermarkIdle
// after it started: one that never listens (here: never polled for its
// subscriber) must not freeze every other split for good.
func TestSplitWithoutAnEstimateHoldsForWatermarkIdle(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := registryConfig(t, nil)
	rs := h.g.attach("r", cfg)
	t.Cleanup(func() { h.g.detach("r") })
	splits := []Split{{Index: 0, Subscription: cfg.Subscriptions[0]}, {Index: 1, Subscription: cfg.Subscriptions[1]}}
	estimated, _ := h.g.reader(splitKey{read: "r", index: 0}, splits[0], cfg)
	h.g.reader(splitKey{read: "r", index: 1}, splits[1], cfg)
	t0 := h.clock.now()
	estimated.mu.Lock()
	estimated.watermark = t0.Add(-time.Second)
	estimated.mu.Unlock()
	if got := h.g.watermark("r"); !got.IsZero() {
		t.Errorf("while the other split may still get its first estimate: %v, want none", got)
	}
	h.clock.advance(cfg.WatermarkIdle)
	h.g.reader(splitKey{read: "r", index: 1}, splits[1], cfg) // polled, never listening
	h.g.reader(splitKey{read: "r", index: 0}, splits[0], cfg)
	if got := h.g.watermark("r"); !got.Equal(t0.Add(-time.Second)) {
		t.Errorf("WatermarkIdle later: %v, want the estimated split's %v", got, t0.Add(-time.Second))
	}
	h.g.watermark("r")
	if got := rs.stats.get(watermarkSkippedUnestimated); got != 1 {
		t.Errorf("watermark_splits_skipped_unestimated = %d, want 1 (once per spell)", got)
	}
}

// A split no longer polled here (the runner moved it to another worker, or
// its bundle is stuck) stays in the registry until LeaseIdle. Past
// WatermarkIdle its frozen estimate must not hold the others; what it holds
// unemitted still does.
func TestSplitNotPolledHoldsOnlyWhatItHolds(t *testing.T) {
	h := newRegistryHarness(t)
	cfg := registryConfig(t, nil)
	rs := h.g.attach("r", cfg)
	t.Cleanup(func() { h.g.detach("r") })
	splits := []Split{{Index: 0, Subscription: cfg.Subscriptions[0]}, {Index: 1, Subscription: cfg.Subscriptions[1]}}
	polled, _ := h.g.reader(splitKey{read: "r", index: 0}, splits[0], cfg)
	moved, _ := h.g.reader(splitKey{read: "r", index: 1}, splits[1], cfg)
	t0 := h.clock.now()
	run := pollRun(t, moved)
	set := func(r *splitReader, w time.Time) {
		r.mu.Lock()
		r.watermark = w
		r.mu.Unlock()
	}
	set(moved, t0.Add(-time.Hour))
	h.clock.advance(cfg.WatermarkIdle)
	h.g.reader(splitKey{read: "r", index: 0}, splits[0], cfg)
	set(polled, h.clock.now().Add(-time.Second))
	if got, want := h.g.watermark("r"), h.clock.now().Add(-time.Second); !got.Equal(want) {
		t.Errorf("the other split not polled for WatermarkIdle, holding nothing: %v, want the polled split's %v", got, want)
	}
	old := t0.Add(-30 * time.Minute)
	deliverTo(moved, run, &pubsub.Message{ID: "held", PublishTime: old}, &fakeHandle{}, "ack-held")
	if got := h.g.watermark("r"); !got.Equal(old) {
		t.Errorf("the stale split holding an unemitted message: %v, want its event time %v", got, old)
	}
	if got := rs.stats.get(watermarkSkippedStale); got != 1 {
		t.Errorf("watermark_splits_skipped_stale = %d, want 1 (once per spell)", got)
	}
}

// A split of a bounded read does not end idle while another split of its
// subscription in the process holds messages: what is beyond that split's
// MaxMessages share comes back when it finishes. Splits of another
// subscription do not count.
func TestSiblingHoldsWhileItBuffers(t *testing.T) {
	h := newRegistryHarness(t)
	subs := testSubs(2)
	cfg := testConfig(t, func(c *Config) { c.Subscriptions = subs; c.Splits = 3 })
	keys := []splitKey{{read: "r", index: 0}, {read: "r", index: 1}, {read: "r", index: 2}}
	var rs []*splitReader
	for i, sub := range []model.Subscription{subs[0], subs[1], subs[0]} {
		r, _ := h.g.reader(keys[i], Split{Index: i, Subscription: sub}, cfg)
		rs = append(rs, r)
	}
	t.Cleanup(func() { h.g.detach("r") })
	holds := func() []bool {
		return []bool{h.g.siblingHolds(keys[0], rs[0]), h.g.siblingHolds(keys[1], rs[1]), h.g.siblingHolds(keys[2], rs[2])}
	}
	if got := holds(); !cmp.Equal(got, []bool{false, false, false}) {
		t.Errorf("nothing buffered: siblingHolds %v, want none", got)
	}
	deliverTo(rs[2], pollRun(t, rs[2]), msg("m0", "data"), &fakeHandle{}, "ack-m0")
	if got := holds(); !cmp.Equal(got, []bool{true, false, false}) {
		t.Errorf("split 2 buffers a message of sub-0: siblingHolds %v, want only split 0's sibling holding", got)
	}
	drain(rs[2], 10, 0)
	if got := holds(); !cmp.Equal(got, []bool{false, false, false}) {
		t.Errorf("split 2 emitted it: siblingHolds %v, want none", got)
	}
}
