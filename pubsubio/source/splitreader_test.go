package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// waitLimit bounds every wait for another goroutine; a wait that hits it
// fails the test saying what it waited for.
const waitLimit = 10 * time.Second

// fakeClock is a hand-moved clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeHandle records what was done to one delivery.
type fakeHandle struct {
	acks, nacks atomic.Int32
}

func (h *fakeHandle) Ack()  { h.acks.Add(1) }
func (h *fakeHandle) Nack() { h.nacks.Add(1) }

func (h *fakeHandle) check(t *testing.T, what string, acks, nacks int32) {
	t.Helper()
	if a, n := h.acks.Load(), h.nacks.Load(); a != acks || n != nacks {
		t.Errorf("%s: %d acks and %d nacks, want %d and %d", what, a, n, acks, nacks)
	}
}

// fakeSub is a subscription whose receive delivers nothing by itself (the
// test calls deliver) and blocks until its context is done. It hands the
// context of every receive call to the test.
type fakeSub struct {
	receives chan context.Context

	mu        sync.Mutex
	acked     [][]string
	nacked    [][]string
	closed    int
	ackErr    error
	inventory []*trackedHandle
}

// trackedHandle is a delivery in a fakeSub's inventory.
type trackedHandle struct {
	handle
	settled atomic.Bool
}

func (t *trackedHandle) Ack()  { t.settled.Store(true); t.handle.Ack() }
func (t *trackedHandle) Nack() { t.settled.Store(true); t.handle.Nack() }

// deliverTo delivers m to r as the client would, and puts the delivery in
// the fake subscription's inventory: like the client under NackImmediately,
// the fake nacks what is still unsettled when its receive ends.
func deliverTo(r *splitReader, run *receiveRun, m *pubsub.Message, h handle, ackID string) {
	tracked := &trackedHandle{handle: h}
	r.mu.Lock()
	inv, _ := r.sub.(interface{ hold(*trackedHandle) })
	r.mu.Unlock()
	if inv != nil {
		inv.hold(tracked)
	}
	r.deliver(run, m, tracked, ackID)
}

func (f *fakeSub) hold(h *trackedHandle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inventory = append(f.inventory, h)
}

// nackInventory is the client's NackImmediately shutdown.
func (f *fakeSub) nackInventory() {
	f.mu.Lock()
	inv := f.inventory
	f.inventory = nil
	f.mu.Unlock()
	for _, h := range inv {
		if !h.settled.Load() {
			h.Nack()
		}
	}
}

func newFakeSub() *fakeSub { return &fakeSub{receives: make(chan context.Context, 100)} }

func (f *fakeSub) receive(ctx context.Context, _ func(*pubsub.Message) bool) error {
	f.receives <- ctx
	<-ctx.Done()
	f.nackInventory()
	return nil
}

func (f *fakeSub) acknowledge(_ context.Context, ackIDs []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = append(f.acked, append([]string(nil), ackIDs...))
	return f.ackErr
}

func (f *fakeSub) nack(_ context.Context, ackIDs []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nacked = append(f.nacked, append([]string(nil), ackIDs...))
	return nil
}

// nackedByRPC returns every ack ID nacked with the RPC, in order.
func (f *fakeSub) nackedByRPC() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, n := range f.nacked {
		ids = append(ids, n...)
	}
	return ids
}

func (f *fakeSub) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

func (f *fakeSub) acknowledged() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.acked...)
}

func (f *fakeSub) closeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// nextReceive returns the context of the next receive call.
func (f *fakeSub) nextReceive(t *testing.T) context.Context {
	t.Helper()
	select {
	case ctx := <-f.receives:
		return ctx
	case <-time.After(waitLimit):
		t.Fatalf("no receive call within %v", waitLimit)
		return nil
	}
}

// noMoreReceives checks that no receive call is queued.
func (f *fakeSub) noMoreReceives(t *testing.T) {
	t.Helper()
	select {
	case <-f.receives:
		t.Error("an unexpected receive call was made")
	default:
	}
}

// awaitRunEnded waits for a stopped receive to return: by then the fake
// has nacked its inventory, as the client's shutdown does.
func awaitRunEnded(t *testing.T, what string, run *receiveRun) {
	t.Helper()
	select {
	case <-run.done:
	case <-time.After(waitLimit):
		t.Fatalf("%s: receive did not return within %v", what, waitLimit)
	}
}

// awaitDone waits for a receive context to be cancelled.
func awaitDone(t *testing.T, what string, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(waitLimit):
		t.Fatalf("%s: receive context not cancelled within %v", what, waitLimit)
	}
}

// awaitCondition polls cond until it holds, for at most waitLimit: for
// state another goroutine reaches without signalling it.
func awaitCondition(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// readerHarness is one split reader over a fakeSub with a hand-moved clock.
type readerHarness struct {
	t      *testing.T
	r      *splitReader
	sub    *fakeSub
	clock  *fakeClock
	stats  *stats
	budget *budget
	dials  atomic.Int32
}

func newReaderHarness(t *testing.T, cfg Config) *readerHarness {
	t.Helper()
	h := &readerHarness{
		t:      t,
		sub:    newFakeSub(),
		clock:  newFakeClock(),
		stats:  &stats{},
		budget: newBudget(cfg.BufferMaxMessages, cfg.BufferMaxBytes),
	}
	split := Split{Index: 0, Subscription: cfg.Subscriptions[0]}
	h.r = newSplitReader(split, cfg, h.budget, h.stats, h.clock.now, func(context.Context) (subscription, error) {
		h.dials.Add(1)
		return h.sub, nil
	})
	// Deliveries crossing the budget stop the subscriber at once; the wait
	// for room has its own tests.
	h.r.budgetWait = 0
	t.Cleanup(func() { h.r.release(nackedRelease) })
	return h
}

// poll polls the reader and returns its running receive.
func (h *readerHarness) poll() *receiveRun {
	h.t.Helper()
	return pollRun(h.t, h.r)
}

func pollRun(t *testing.T, r *splitReader) *receiveRun {
	t.Helper()
	if err := r.poll(context.Background()); err != nil {
		t.Fatalf("poll: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == nil {
		t.Fatal("poll left no subscriber running")
	}
	return r.running
}

func (h *readerHarness) count(c counter) int64 { return h.stats.get(c) }

func (h *readerHarness) checkCount(name string, c counter, want int64) {
	h.t.Helper()
	if got := h.stats.get(c); got != want {
		h.t.Errorf("%s = %d, want %d", name, got, want)
	}
}

func (h *readerHarness) checkUsage(messages int, bytes int64) {
	h.t.Helper()
	if m, b := h.budget.usage(); m != messages || b != bytes {
		h.t.Errorf("budget usage %d messages / %d bytes, want %d / %d", m, b, messages, bytes)
	}
}

func msg(id, data string) *pubsub.Message {
	return &pubsub.Message{ID: id, Data: []byte(data), PublishTime: time.Date(2024, 1, 1, 11, 0, 0, 0, time.UTC)}
}

// deliverN delivers messages m0..m(n-1) (ack IDs ack-m0...) and returns
// their handles.
func deliverN(r *splitReader, run *receiveRun, prefix string, n int) []*fakeHandle {
	hs := make([]*fakeHandle, n)
	for i := range hs {
		hs[i] = &fakeHandle{}
		id := fmt.Sprintf("%s%d", prefix, i)
		deliverTo(r, run, msg(id, "data-"+id), hs[i], "ack-"+id)
	}
	return hs
}

func ackIDsOf(ds []*delivery) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ackID
	}
	return ids
}

func TestSplitReaderDeliverAndDrain(t *testing.T) {
	cfg := testConfig(t, nil)
	h := newReaderHarness(t, cfg)
	run := h.poll()
	h.sub.nextReceive(t)

	attempt := 3
	full := &pubsub.Message{
		ID: "m-full", Data: []byte("payload"), Attributes: map[string]string{"k": "v"}, OrderingKey: "key",
		PublishTime: time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC), DeliveryAttempt: &attempt,
	}
	hFull := &fakeHandle{}
	deliverTo(h.r, run, full, hFull, "ack-full")
	hNoID := &fakeHandle{}
	deliverTo(h.r, run, msg("m-noid", "x"), hNoID, "")
	hs := deliverN(h.r, run, "m", 3)
	h.checkCount("messages_received", messagesReceived, 5)
	h.checkUsage(5, int64(len("payload")+len("key")+len("kv")+1+3*len("data-m0")))

	first := h.r.drain(2, 7)
	rest := h.r.drain(100, 8)
	if got, want := ackIDsOf(first), []string{"ack-full", syntheticAckIDPrefix + "m-noid"}; !cmp.Equal(got, want) {
		t.Errorf("first drain: %v, want %v", got, want)
	}
	if got, want := ackIDsOf(rest), []string{"ack-m0", "ack-m1", "ack-m2"}; !cmp.Equal(got, want) {
		t.Errorf("second drain: %v, want %v (arrival order)", got, want)
	}
	if len(h.r.drain(100, 9)) != 0 {
		t.Error("a third drain returned messages")
	}
	wantMsg := model.Message{
		ID: "m-full", Data: []byte("payload"), Attributes: map[string]string{"k": "v"}, OrderingKey: "key",
		PublishTime: full.PublishTime, DeliveryAttempt: 3, Subscription: cfg.Subscriptions[0],
	}
	if diff := cmp.Diff(wantMsg, first[0].msg); diff != "" {
		t.Errorf("emitted message (-want +got):\n%s", diff)
	}
	if first[0].seq != 7 || rest[0].seq != 8 {
		t.Errorf("seqs %d and %d, want 7 and 8", first[0].seq, rest[0].seq)
	}

	// Draining is emitting, not committing: nothing is acked yet.
	hFull.check(t, "drained message", 0, 0)
	hNoID.check(t, "drained message without ack ID", 0, 0)
	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("drained m%d", i), 0, 0)
	}
	// messages_emitted counts what the bundle emits (emitBatch), not what
	// it drains: a message that fails to decode is drained, not emitted.
	h.checkCount("messages_emitted", messagesEmitted, 0)
	h.checkCount("messages_acked", messagesAcked, 0)
	if got := h.stats.pendingAcks.Load(); got != 5 {
		t.Errorf("pending acks %d, want 5", got)
	}
	h.checkUsage(0, 0)
}

func TestSplitReaderAckIsIdempotent(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	hs := deliverN(h.r, run, "m", 3)
	ids := ackIDsOf(h.r.drain(10, 0))

	// The finalization callback and the next bundle both ack the same IDs.
	if n := h.r.ack(ids); n != 3 {
		t.Errorf("first ack acked %d, want 3", n)
	}
	if n := h.r.ack(ids); n != 0 {
		t.Errorf("second ack acked %d, want 0", n)
	}
	if n := h.r.ack([]string{"ack-unknown"}); n != 0 {
		t.Errorf("ack of an unknown ID acked %d", n)
	}
	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("m%d", i), 1, 0)
	}
	h.checkCount("messages_acked", messagesAcked, 3)
	if got := h.stats.pendingAcks.Load(); got != 0 {
		t.Errorf("pending acks %d after acking everything, want 0", got)
	}
}

// Acking only what a bundle emitted leaves the rest pending; buffered
// messages cannot be acked at all.
func TestSplitReaderAckOnlyPending(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	hs := deliverN(h.r, run, "m", 3)
	h.r.drain(1, 0)
	if n := h.r.ack([]string{"ack-m0", "ack-m1", "ack-m2"}); n != 1 {
		t.Errorf("ack acked %d, want 1 (only m0 was emitted)", n)
	}
	hs[0].check(t, "m0", 1, 0)
	hs[1].check(t, "buffered m1", 0, 0)
	hs[2].check(t, "buffered m2", 0, 0)
	if got := ackIDsOf(h.r.drain(10, 1)); !cmp.Equal(got, []string{"ack-m1", "ack-m2"}) {
		t.Errorf("drain after the ack attempt: %v, want m1 and m2 still buffered", got)
	}
}

func TestSplitReaderGiveBackNacksFromSeq(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	hs := deliverN(h.r, run, "m", 6)
	var bySeq [4][]string
	for seq := int64(1); seq <= 3; seq++ {
		bySeq[seq] = ackIDsOf(h.r.drain(2, seq))
	}
	stillBuffered := &fakeHandle{}
	deliverTo(h.r, run, msg("buffered", "x"), stillBuffered, "ack-buffered")

	h.r.giveBack(2)
	stillBuffered.check(t, "message still buffered (never emitted)", 0, 0)
	hs[0].check(t, "m0 (seq 1)", 0, 0)
	hs[1].check(t, "m1 (seq 1)", 0, 0)
	for i := 2; i < 6; i++ {
		hs[i].check(t, fmt.Sprintf("m%d (seq %d)", i, i/2+1), 0, 1)
	}
	h.checkCount("messages_nacked_uncommitted", nackedUncommitted, 4)

	// Giving back again changes nothing; what was given back cannot be acked.
	h.r.giveBack(2)
	if n := h.r.ack(append(bySeq[2], bySeq[3]...)); n != 0 {
		t.Errorf("acked %d given-back messages", n)
	}
	if n := h.r.ack(bySeq[1]); n != 2 {
		t.Errorf("acked %d of seq 1, want 2", n)
	}
	hs[0].check(t, "m0 after ack", 1, 0)
	for i := 2; i < 6; i++ {
		hs[i].check(t, fmt.Sprintf("m%d after ack", i), 0, 1)
	}
	h.checkCount("messages_nacked_uncommitted", nackedUncommitted, 4)
	if got := ackIDsOf(h.r.drain(10, 2)); !cmp.Equal(got, []string{"ack-buffered"}) {
		t.Errorf("drain after giveBack: %v, want the still-buffered message", got)
	}
}

func TestSplitReaderReleaseNacksEverythingHeld(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	recvCtx := h.sub.nextReceive(t)
	hs := deliverN(h.r, run, "m", 4)
	pendingIDs := ackIDsOf(h.r.drain(2, 0)) // m0, m1 pending; m2, m3 buffered

	h.r.release(nackedRelease)

	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("m%d after release", i), 0, 1)
	}
	h.checkCount("messages_nacked_release", nackedRelease, 4)
	h.checkUsage(0, 0)
	if got := h.stats.pendingAcks.Load(); got != 0 {
		t.Errorf("pending acks %d after release, want 0", got)
	}
	// The client's own shutdown nack cannot be relied on (it races Receive
	// returning), so the release nacks everything held with the RPC too.
	if got, want := h.sub.nackedByRPC(), []string{"ack-m2", "ack-m3", "ack-m0", "ack-m1"}; !cmp.Equal(sorted(got), sorted(want)) {
		t.Errorf("nacked with the RPC %v, want %v", got, want)
	}
	awaitDone(t, "released split", recvCtx)
	if got := h.sub.closeCount(); got != 1 {
		t.Errorf("subscription closed %d times, want 1", got)
	}

	// The bundle that emitted m0 and m1 commits afterwards: its acks do
	// nothing, the messages were given back.
	if n := h.r.ack(pendingIDs); n != 0 {
		t.Errorf("acked %d released messages", n)
	}
	hs[0].check(t, "m0 acked after release", 0, 1)
	hs[1].check(t, "m1 acked after release", 0, 1)

	// A delivery racing the release is nacked, not buffered.
	late := &fakeHandle{}
	deliverTo(h.r, run, msg("late", "x"), late, "ack-late")
	late.check(t, "delivery after release", 0, 1)
	h.checkCount("messages_nacked_shutdown", nackedShutdown, 1)

	// Releasing twice does nothing more.
	h.r.release(nackedRelease)
	h.checkCount("messages_nacked_release", nackedRelease, 4)
	if got := h.sub.closeCount(); got != 1 {
		t.Errorf("subscription closed %d times after a second release, want 1", got)
	}
}

func TestSplitReaderReleaseResendsRecentAcks(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	deliverN(h.r, run, "m", 3)
	deliverTo(h.r, run, msg("noid", "x"), &fakeHandle{}, "") // synthetic ack ID
	h.r.drain(10, 0)

	h.r.ack([]string{"ack-m0"})
	h.clock.advance(recentAckWindow + time.Second) // m0's ack is surely sent by now
	h.r.ack([]string{"ack-m1", "ack-m2", syntheticAckIDPrefix + "noid"})
	h.clock.advance(recentAckWindow / 2)

	h.r.release(nackedRelease)
	// Only real ack IDs that the client may not have sent yet go out again.
	want := [][]string{{"ack-m1", "ack-m2"}}
	if diff := cmp.Diff(want, h.sub.acknowledged()); diff != "" {
		t.Errorf("acks resent on release (-want +got):\n%s", diff)
	}
}

func TestSplitReaderReleaseWithoutRecentAcksSendsNothing(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	deliverN(h.r, run, "m", 2)
	h.r.drain(10, 0)
	h.r.release(nackedRelease)
	if got := h.sub.acknowledged(); len(got) != 0 {
		t.Errorf("acknowledge called with %v, want no call", got)
	}
}

// A split released while a bundle holds it (the janitor releasing it
// between the bundle's registry lookup and its poll) must not start a new
// subscriber: the released reader is out of the registry, so nothing would
// ever drain or release that subscriber, and the messages it holds would
// sit leased, then be redelivered into it, until the process ends.
func TestSplitReaderPollAfterReleaseDoesNotReopen(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	h.poll()
	h.sub.nextReceive(t)
	h.r.release(nackedRelease)

	err := h.r.poll(context.Background())
	h.r.mu.Lock()
	running := h.r.running != nil
	h.r.mu.Unlock()
	if running {
		t.Errorf("poll after release (returned %v) started a subscriber on the released split (dialed %d times)", err, h.dials.Load())
		h.sub.nextReceive(t)
	}
	h.sub.noMoreReceives(t)
}

func TestBudgetMessageLimitNacksStopsAndRestarts(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages = 2 }))
	run := h.poll()
	recvCtx := h.sub.nextReceive(t)
	hs := deliverN(h.r, run, "m", 2)
	h.checkUsage(2, int64(2*len("data-m0")))

	over := &fakeHandle{}
	deliverTo(h.r, run, msg("over", "data-over"), over, "ack-over")
	awaitRunEnded(t, "subscriber crossing the budget", run)
	over.check(t, "the delivery crossing the message budget", 0, 1)
	// Stopping the subscriber makes everything it held invalid: it went
	// back too, under the same reason.
	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("m%d held when the budget was crossed", i), 0, 1)
	}
	h.checkCount("messages_nacked_budget", nackedBudget, 3)
	h.checkUsage(0, 0)
	awaitDone(t, "subscriber crossing the budget", recvCtx)

	// Deliveries still in flight from the stopped subscriber are refused.
	straggler := &fakeHandle{}
	deliverTo(h.r, run, msg("straggler", "x"), straggler, "ack-straggler")
	straggler.check(t, "delivery from the stopped subscriber", 0, 1)
	h.checkCount("messages_nacked_shutdown", nackedShutdown, 1)
	if got := h.r.drain(10, 0); len(got) != 0 {
		t.Errorf("drained %v after the budget stop, want nothing", ackIDsOf(got))
	}

	// A stopped split is not idle however long the downstream stalls, and
	// after the next poll restarts it idleness counts from the restart: a
	// stall longer than IdleTimeout must not end a bounded read.
	h.clock.advance(time.Hour)
	if got := h.r.snapshot(time.Time{}).lastArrival; !got.Equal(h.clock.now()) {
		t.Errorf("stopped at the budget, the split counts idleness from %v, want now (%v): it is not listening", got, h.clock.now())
	}
	h.checkCount("subscriber_restarts", subscriberRestarts, 0)
	run2 := h.poll()
	if got := h.r.snapshot(time.Time{}).lastArrival; !got.Equal(h.clock.now()) {
		t.Errorf("after the restart the split counts idleness from %v, want the restart at %v", got, h.clock.now())
	}
	if run2 == run {
		t.Fatal("poll after the budget stop kept the stopped run")
	}
	recvCtx2 := h.sub.nextReceive(t)
	if isDone(recvCtx2) {
		t.Error("the restarted subscriber's context is already done")
	}
	h.checkCount("subscriber_restarts", subscriberRestarts, 1)
	if got := h.dials.Load(); got != 1 {
		t.Errorf("dialed %d times, want 1 (the restart reuses the client)", got)
	}
	again := &fakeHandle{}
	deliverTo(h.r, run2, msg("again", "x"), again, "ack-again")
	if got := ackIDsOf(h.r.drain(10, 1)); !cmp.Equal(got, []string{"ack-again"}) {
		t.Errorf("drain after restart: %v, want [ack-again]", got)
	}
	again.check(t, "delivery after restart", 0, 0)
}

// A delivery that finds the budget full waits for room, holding the
// client back, and is buffered once a bundle drains: the subscriber keeps
// running and nothing is given back. Meanwhile the split is not idle.
func TestBudgetFullWaitsForRoom(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages = 2 }))
	h.r.budgetWait = time.Minute
	run := h.poll()
	recvCtx := h.sub.nextReceive(t)
	hs := deliverN(h.r, run, "m", 2)

	waiter, delivered := h.deliverWaiting(run, msg("waiter", "data-waiter"))
	h.clock.advance(time.Hour)
	if got := h.r.snapshot(time.Time{}).lastArrival; !got.Equal(h.clock.now()) {
		t.Errorf("waiting for room, the split counts idleness from %v, want now (%v)", got, h.clock.now())
	}
	if got := ackIDsOf(h.r.drain(1, 0)); !cmp.Equal(got, []string{"ack-m0"}) {
		t.Fatalf("drain: %v, want [ack-m0]", got)
	}
	select {
	case <-delivered:
	case <-time.After(waitLimit):
		t.Fatalf("the waiting delivery was not buffered within %v of the drain that made room", waitLimit)
	}
	if got := ackIDsOf(h.r.drain(10, 1)); !cmp.Equal(got, []string{"ack-m1", "ack-waiter"}) {
		t.Errorf("drain after the wait: %v, want [ack-m1 ack-waiter]", got)
	}
	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("m%d", i), 0, 0)
	}
	waiter.check(t, "the delivery that waited", 0, 0)
	h.checkCount("messages_nacked_budget", nackedBudget, 0)
	if isDone(recvCtx) {
		t.Error("the subscriber was stopped")
	}
}

// What waits for room is capped at the budget's size: a delivery beyond
// that stops the subscriber at once, without waiting.
func TestBudgetWaitingIsCapped(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages = 1 }))
	h.r.budgetWait = time.Minute
	run := h.poll()
	recvCtx := h.sub.nextReceive(t)
	deliverN(h.r, run, "m", 1)
	waiter, delivered := h.deliverWaiting(run, msg("waiter", "x"))

	over := &fakeHandle{}
	deliverTo(h.r, run, msg("over", "x"), over, "ack-over") // returns at once
	awaitRunEnded(t, "subscriber whose delivery found the wait allowance full", run)
	over.check(t, "the delivery beyond the wait allowance", 0, 1)
	awaitDone(t, "subscriber whose delivery found the wait allowance full", recvCtx)
	checkRefusedAfterWait(t, "the delivery waiting when its subscriber stopped", waiter, delivered)
	h.checkUsage(0, 0)
}

// Deliveries wait for room only where the client's flow control bounds how
// many can wait: without it the wait allowance would fill at once and stop
// the subscriber anyway, after holding a budget's worth more.
func TestBudgetWaitNeedsClientFlowControl(t *testing.T) {
	if got := budgetWaitFor(testConfig(t, nil)); got != budgetWait {
		t.Errorf("with the default flow control the wait is %v, want %v", got, budgetWait)
	}
	if got := budgetWaitFor(testConfig(t, func(c *Config) { c.MaxOutstandingMessages = -1 })); got != 0 {
		t.Errorf("without a client message limit the wait is %v, want none", got)
	}
}

// deliverWaiting delivers m (ack ID ack-ID) from another goroutine, as the
// client does, and returns once it waits for room in the budget; delivered
// is closed when deliver returns.
func (h *readerHarness) deliverWaiting(run *receiveRun, m *pubsub.Message) (waiter *fakeHandle, delivered chan struct{}) {
	h.t.Helper()
	waiter, delivered = &fakeHandle{}, make(chan struct{})
	go func() {
		defer close(delivered)
		deliverTo(h.r, run, m, waiter, "ack-"+m.ID)
	}()
	awaitCondition(h.t, "the delivery to wait for room", func() bool {
		h.r.mu.Lock()
		defer h.r.mu.Unlock()
		return h.r.waiting == 1
	})
	return waiter, delivered
}

// checkRefusedAfterWait waits for a delivery that waited for room to
// return and checks it was refused: nacked, never acked. The stopped
// subscriber also gave it back with what it had not handed over, so it may
// be nacked twice (harmless).
func checkRefusedAfterWait(t *testing.T, what string, waiter *fakeHandle, delivered chan struct{}) {
	t.Helper()
	select {
	case <-delivered:
	case <-time.After(waitLimit):
		t.Fatalf("%s: deliver did not return within %v", what, waitLimit)
	}
	if a, n := waiter.acks.Load(), waiter.nacks.Load(); a != 0 || n < 1 {
		t.Errorf("%s: %d acks and %d nacks, want none and at least one", what, a, n)
	}
}

// A delivery still waiting for room when budgetWait runs out stops the
// subscriber, as one crossing the budget without a wait does; one waiting
// when its subscriber is stopped for another reason is refused.
func TestBudgetWaitRunsOutOrRunStops(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages = 1 }))
	h.r.budgetWait = 50 * time.Millisecond
	run := h.poll()
	recvCtx := h.sub.nextReceive(t)
	deliverN(h.r, run, "m", 1)
	over := &fakeHandle{}
	deliverTo(h.r, run, msg("over", "x"), over, "ack-over") // returns after budgetWait
	awaitRunEnded(t, "subscriber whose delivery waited out budgetWait", run)
	over.check(t, "the delivery that waited out budgetWait", 0, 1)
	h.checkCount("messages_nacked_budget", nackedBudget, 2)
	awaitDone(t, "subscriber whose delivery waited out budgetWait", recvCtx)

	h.r.budgetWait = time.Minute
	run2 := h.poll()
	h.sub.nextReceive(t)
	deliverN(h.r, run2, "n", 1)
	waiter, delivered := h.deliverWaiting(run2, msg("waiter", "x"))
	h.r.release(nackedRelease)
	checkRefusedAfterWait(t, "the delivery waiting when its split was released", waiter, delivered)
	h.checkUsage(0, 0)
}

func TestBudgetByteLimit(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxBytes = 10 }))
	run := h.poll()
	recvCtx := h.sub.nextReceive(t)
	first := &fakeHandle{}
	// 2 data + 3 ordering key + 1 attribute key + 2 attribute value = 8
	m := &pubsub.Message{ID: "a", Data: []byte("xx"), OrderingKey: "key", Attributes: map[string]string{"k": "vv"}}
	deliverTo(h.r, run, m, first, "ack-a")
	h.checkUsage(1, 8)
	first.check(t, "first delivery", 0, 0)

	over := &fakeHandle{}
	deliverTo(h.r, run, msg("b", "xxx"), over, "ack-b") // 8 + 3 > 10
	awaitRunEnded(t, "subscriber crossing the byte budget", run)
	over.check(t, "delivery crossing the byte budget", 0, 1)
	if h.count(nackedBudget) < 1 {
		t.Error("the budget nack was not counted")
	}
	awaitDone(t, "subscriber crossing the byte budget", recvCtx)
}

func TestBudgetAdmitsOversizedMessageWhenNothingIsBuffered(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxBytes = 10 }))
	run := h.poll()
	recvCtx := h.sub.nextReceive(t)
	big := strings.Repeat("x", 100)
	for i := range 2 {
		fh := &fakeHandle{}
		id := fmt.Sprintf("big%d", i)
		deliverTo(h.r, run, msg(id, big), fh, "ack-"+id)
		fh.check(t, id, 0, 0)
		h.checkUsage(1, 100)
		if got := ackIDsOf(h.r.drain(10, int64(i))); !cmp.Equal(got, []string{"ack-" + id}) {
			t.Errorf("drain: %v, want [ack-%s]", got, id)
		}
	}
	h.checkCount("messages_nacked_budget", nackedBudget, 0)
	if isDone(recvCtx) {
		t.Error("the subscriber was stopped")
	}

	// With something buffered, a message that does not fit is refused.
	deliverTo(h.r, run, msg("small", "x"), &fakeHandle{}, "ack-small")
	over := &fakeHandle{}
	deliverTo(h.r, run, msg("big2", big), over, "ack-big2")
	awaitRunEnded(t, "subscriber crossing the byte budget", run)
	over.check(t, "oversized message with something buffered", 0, 1)
}

func TestSupersededWhileBuffered(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	stale, fresh := &fakeHandle{}, &fakeHandle{}
	deliverTo(h.r, run, msg("m", "x"), stale, "ack-1")
	deliverTo(h.r, run, msg("m", "x"), fresh, "ack-2")

	stale.check(t, "stale copy", 0, 1)
	fresh.check(t, "fresh copy", 0, 0)
	h.checkCount("messages_nacked_superseded", nackedSuperseded, 1)
	h.checkUsage(1, 1)

	got := h.r.drain(10, 0)
	if ids := ackIDsOf(got); !cmp.Equal(ids, []string{"ack-2"}) {
		t.Fatalf("drained %v, want only the fresh copy [ack-2]", ids)
	}
	if n := h.r.ack([]string{"ack-1", "ack-2"}); n != 1 {
		t.Errorf("acked %d, want 1", n)
	}
	stale.check(t, "stale copy after ack", 0, 1)
	fresh.check(t, "fresh copy after ack", 1, 0)
}

func TestSupersededWhilePending(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	stale, fresh := &fakeHandle{}, &fakeHandle{}
	deliverTo(h.r, run, msg("m", "x"), stale, "ack-1")
	if ids := ackIDsOf(h.r.drain(10, 0)); !cmp.Equal(ids, []string{"ack-1"}) {
		t.Fatalf("first drain %v", ids)
	}

	// The lease lapsed and Pub/Sub redelivered while the bundle was
	// uncommitted.
	deliverTo(h.r, run, msg("m", "x"), fresh, "ack-2")
	stale.check(t, "stale pending copy", 0, 1)
	h.checkCount("messages_nacked_superseded", nackedSuperseded, 1)
	if got := h.stats.pendingAcks.Load(); got != 0 {
		t.Errorf("pending acks %d, want 0 (the stale copy is no longer pending)", got)
	}

	if ids := ackIDsOf(h.r.drain(10, 1)); !cmp.Equal(ids, []string{"ack-2"}) {
		t.Fatalf("second drain %v, want the fresh copy [ack-2] once more", ids)
	}
	if len(h.r.drain(10, 2)) != 0 {
		t.Error("the fresh copy was drained twice")
	}
	if n := h.r.ack([]string{"ack-1"}); n != 0 {
		t.Errorf("the committed bundle acked %d stale copies", n)
	}
	if n := h.r.ack([]string{"ack-2"}); n != 1 {
		t.Errorf("acked %d fresh copies, want 1", n)
	}
	stale.check(t, "stale copy at the end", 0, 1)
	fresh.check(t, "fresh copy at the end", 1, 0)
}

// A subscriber that stops by itself (a permanent stream error) gives back
// what it held and reports the failure once, naming the subscription.
func TestSplitReaderSubscriberFailure(t *testing.T) {
	cfg := testConfig(t, nil)
	sub := &failingSub{fakeSub: newFakeSub(), fail: make(chan error, 1)}
	r := newSplitReader(Split{Subscription: cfg.Subscriptions[0]}, cfg, newBudget(10, 1000), &stats{}, newFakeClock().now,
		func(context.Context) (subscription, error) { return sub, nil })
	t.Cleanup(func() { r.release(nackedRelease) })
	run := pollRun(t, r)
	nacked := make(chan string, 2)
	hs := make([]*fakeHandle, 2)
	for i := range hs {
		hs[i] = &fakeHandle{}
		id := fmt.Sprintf("m%d", i)
		deliverTo(r, run, msg(id, "x"), notifyingHandle{hs[i], id, nacked}, "ack-"+id)
	}
	r.drain(1, 0)

	sub.fail <- errors.New("stream broke")
	// The reader gives back what it held, then records the failure under
	// the same lock that poll takes.
	var seen []string
	for len(seen) < 2 {
		select {
		case id := <-nacked:
			seen = append(seen, id)
		case <-time.After(waitLimit):
			t.Fatalf("within %v of the stream failing only %v were nacked, want m0 and m1", waitLimit, seen)
		}
	}
	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("m%d held by the failed subscriber", i), 0, 1)
	}
	err := r.poll(context.Background())
	if err == nil || !strings.Contains(err.Error(), "stream broke") || !strings.Contains(err.Error(), cfg.Subscriptions[0].String()) {
		t.Errorf("poll after the failure: %v, want the stream error naming the subscription", err)
	}
	if err := r.poll(context.Background()); err != nil {
		t.Errorf("second poll after the failure: %v, want a restart", err)
	}
}

// notifyingHandle reports its nacks on a channel.
type notifyingHandle struct {
	*fakeHandle
	id     string
	nacked chan<- string
}

func (h notifyingHandle) Nack() {
	h.fakeHandle.Nack()
	h.nacked <- h.id
}

// failingSub's receive returns the error sent on fail.
type failingSub struct {
	*fakeSub
	fail chan error
}

func (f *failingSub) receive(ctx context.Context, _ func(*pubsub.Message) bool) error {
	defer f.nackInventory()
	select {
	case err := <-f.fail:
		return err
	case <-ctx.Done():
		return nil
	}
}
