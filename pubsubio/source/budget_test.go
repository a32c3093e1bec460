package source

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/go-cmp/cmp"
)

// A delivery that finds the budget full and gets no room is withheld: the
// subscriber keeps running and keeps its lease, what is buffered stays for
// the next bundle, every later delivery is withheld behind it, and the next
// bundle gives back what was withheld. Meanwhile the split is not idle.
func TestBudgetFullWithholdsAndKeepsWhatIsBuffered(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages = 2 }))
	run := h.poll()
	recvCtx := h.conn.nextReceive(t)
	hs := deliverN(h.r, run, "m", 2)
	over, later := &fakeHandle{}, &fakeHandle{}
	older := msg("over", "data-over")
	older.PublishTime = older.PublishTime.Add(-time.Hour)
	deliverTo(h.r, run, older, over, "ack-over")
	deliverTo(h.r, run, msg("later", "x"), later, "ack-later")
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"over", "later"}) {
		t.Errorf("withheld %v, want [over later]", got)
	}
	over.check(t, "the delivery crossing the budget", 0, 0)
	later.check(t, "a delivery after it", 0, 0)
	h.checkUsage(2, int64(2*len("data-m0")))
	st := state(h.r)
	if st.listening {
		t.Error("a split withholding deliveries counts as listening")
	}
	if want := older.PublishTime; !st.oldestBuffered.Equal(want) {
		t.Errorf("oldest event time not yet emitted %v, want the withheld message's %v", st.oldestBuffered, want)
	}

	if got := ackIDsOf(drain(h.r, 10, 0)); !cmp.Equal(got, []string{"ack-m0", "ack-m1"}) {
		t.Errorf("drain: %v, want what was buffered, [ack-m0 ack-m1]", got)
	}
	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("m%d, buffered when the budget was crossed", i), 0, 0)
	}
	over.check(t, "the withheld delivery after the drain", 0, 1)
	later.check(t, "the later withheld delivery after the drain", 0, 1)
	h.checkCount("messages_nacked_budget", nackedBudget, 2)
	if isDone(recvCtx) {
		t.Error("the subscriber was stopped at the budget")
	}
	// Their redeliveries come back into the room kept for them.
	deliverTo(h.r, run, msg("over", "data-over"), &fakeHandle{}, "ack-over-2")
	deliverTo(h.r, run, msg("later", "x"), &fakeHandle{}, "ack-later-2")
	if got := ackIDsOf(drain(h.r, 10, 1)); !cmp.Equal(got, []string{"ack-over-2", "ack-later-2"}) {
		t.Errorf("drain after the give-back: %v, want the redeliveries [ack-over-2 ack-later-2]", got)
	}
	h.checkCount("subscriber_restarts", subscriberRestarts, 0)
}

// A drain gives back only the oldest withheld deliveries that fit the room
// it made, and takes them back when they are redelivered, ahead of later
// deliveries; a release gives back the rest with the RPC.
func TestBudgetReturnsWhatFitsAndTakesItBack(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages = 2 }))
	run := h.poll()
	deliverN(h.r, run, "m", 2)
	a, b, c := &fakeHandle{}, &fakeHandle{}, &fakeHandle{}
	deliverTo(h.r, run, msg("a", "x"), a, "ack-a")
	deliverTo(h.r, run, msg("b", "x"), b, "ack-b")
	deliverTo(h.r, run, msg("c", "x"), c, "ack-c")
	if got := ackIDsOf(drain(h.r, 1, 0)); !cmp.Equal(got, []string{"ack-m0"}) {
		t.Fatalf("drain: %v, want [ack-m0]", got)
	}
	a.check(t, "a, the oldest withheld, fitting the room of one", 0, 1)
	b.check(t, "b, not fitting", 0, 0)
	c.check(t, "c, not fitting", 0, 0)

	// a's redelivery passes what is still withheld; a new delivery does not.
	again := &fakeHandle{}
	deliverTo(h.r, run, msg("a", "x"), again, "ack-a2")
	deliverTo(h.r, run, msg("d", "x"), &fakeHandle{}, "ack-d")
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"b", "c", "d"}) {
		t.Errorf("withheld %v, want [b c d]", got)
	}
	h.checkCount("messages_nacked_budget", nackedBudget, 1)

	h.r.release(nackedRelease)
	if got, want := sorted(h.conn.nackedByRPC()), []string{"ack-a2", "ack-b", "ack-c", "ack-d", "ack-m0", "ack-m1"}; !cmp.Equal(got, want) {
		t.Errorf("the release gave back by RPC %v, want everything it held (m0 emitted, m1 and a2 buffered, b c d withheld), %v", got, want)
	}
}

// Under OrderingPerKey a key whose withheld message went back holds its
// later deliveries back until the redelivery arrives, so none overtakes it.
func TestBudgetWithheldKeyIsNotOvertaken(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) {
		c.BufferMaxMessages = 1
		c.Ordering = OrderingPerKey
	}))
	run := h.poll()
	keyed := func(id string) *pubsub.Message {
		m := msg(id, "x")
		m.OrderingKey = "k"
		return m
	}
	deliverTo(h.r, run, keyed("k1"), &fakeHandle{}, "ack-k1")
	k2 := &fakeHandle{}
	deliverTo(h.r, run, keyed("k2"), k2, "ack-k2")
	if got := ackIDsOf(drain(h.r, 10, 0)); !cmp.Equal(got, []string{"ack-k1"}) {
		t.Fatalf("drain: %v, want [ack-k1]", got)
	}
	k2.check(t, "k2, withheld and given back", 0, 1)

	// Nothing is withheld now and there is room, yet k3 waits for k2.
	deliverTo(h.r, run, keyed("k3"), &fakeHandle{}, "ack-k3")
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"k3"}) {
		t.Errorf("withheld %v, want [k3]: it would overtake k2's redelivery", got)
	}
	deliverTo(h.r, run, keyed("k2"), &fakeHandle{}, "ack-k2-again")
	if got := ackIDsOf(drain(h.r, 10, 1)); !cmp.Equal(got, []string{"ack-k2-again"}) {
		t.Errorf("drain: %v, want k2's redelivery first", got)
	}
}

// Without the client's flow control only the budget bounds what is
// withheld: deliveries past a full budget are withheld, as with flow
// control, until BufferMaxMessages of them are; the next one stops the
// subscriber, which gives back all it holds until the next poll restarts
// it.
func TestBudgetWithoutFlowControlWithholdsThenStops(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) {
		c.BufferMaxMessages = 2
		c.MaxOutstandingMessages, c.MaxOutstandingBytes = -1, -1
	}))
	run := h.poll()
	recvCtx := h.conn.nextReceive(t)
	hs := deliverN(h.r, run, "m", 2)
	h.checkUsage(2, int64(2*len("data-m0")))
	hs = append(hs, deliverN(h.r, run, "w", 2)...)
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"w0", "w1"}) {
		t.Fatalf("withheld %v past the full budget, want [w0 w1]", got)
	}
	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("delivery %d, buffered or withheld", i), 0, 0)
	}

	over := &fakeHandle{}
	deliverTo(h.r, run, msg("over", "data-over"), over, "ack-over")
	awaitRunEnded(t, "subscriber past BufferMaxMessages withheld", run)
	over.check(t, "the delivery crossing the message budget", 0, 1)
	// Stopping the subscriber makes everything it held invalid: it went
	// back too, under the same reason.
	for i, fh := range hs {
		fh.check(t, fmt.Sprintf("delivery %d, held when the subscriber stopped", i), 0, 1)
	}
	h.checkCount("messages_nacked_budget", nackedBudget, 5)
	h.checkUsage(0, 0)
	awaitDone(t, "subscriber crossing the budget", recvCtx)

	// Deliveries still in flight from the stopped subscriber are refused.
	straggler := &fakeHandle{}
	deliverTo(h.r, run, msg("straggler", "x"), straggler, "ack-straggler")
	straggler.check(t, "delivery from the stopped subscriber", 0, 1)
	h.checkCount("messages_nacked_shutdown", nackedShutdown, 1)
	if got := drain(h.r, 10, 0); len(got) != 0 {
		t.Errorf("drained %v after the budget stop, want nothing", ackIDsOf(got))
	}

	// A stopped split is not idle however long the downstream stalls, and
	// after the next poll restarts it idleness counts from the restart: a
	// stall longer than IdleTimeout must not end a bounded read.
	h.clock.advance(time.Hour)
	if got := state(h.r).listeningSince; !got.Equal(h.clock.now()) {
		t.Errorf("stopped at the budget, the split counts idleness from %v, want now (%v): it is not listening", got, h.clock.now())
	}
	h.checkCount("subscriber_restarts", subscriberRestarts, 0)
	run2 := h.poll()
	if got := state(h.r).listeningSince; !got.Equal(h.clock.now()) {
		t.Errorf("after the restart the split counts idleness from %v, want the restart at %v", got, h.clock.now())
	}
	if run2 == run {
		t.Fatal("poll after the budget stop kept the stopped run")
	}
	recvCtx2 := h.conn.nextReceive(t)
	if isDone(recvCtx2) {
		t.Error("the restarted subscriber's context is already done")
	}
	h.checkCount("subscriber_restarts", subscriberRestarts, 1)
	if got := h.dials.Load(); got != 1 {
		t.Errorf("dialed %d times, want 1 (the restart reuses the client)", got)
	}
	again := &fakeHandle{}
	deliverTo(h.r, run2, msg("again", "x"), again, "ack-again")
	if got := ackIDsOf(drain(h.r, 10, 1)); !cmp.Equal(got, []string{"ack-again"}) {
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
	recvCtx := h.conn.nextReceive(t)
	hs := deliverN(h.r, run, "m", 2)

	waiter, delivered := h.deliverWaiting(run, msg("waiter", "data-waiter"))
	h.clock.advance(time.Hour)
	if got := state(h.r).listeningSince; !got.Equal(h.clock.now()) {
		t.Errorf("waiting for room, the split counts idleness from %v, want now (%v)", got, h.clock.now())
	}
	if got := ackIDsOf(drain(h.r, 1, 0)); !cmp.Equal(got, []string{"ack-m0"}) {
		t.Fatalf("drain: %v, want [ack-m0]", got)
	}
	select {
	case <-delivered:
	case <-time.After(waitLimit):
		t.Fatalf("the waiting delivery was not buffered within %v of the drain that made room", waitLimit)
	}
	if got := ackIDsOf(drain(h.r, 10, 1)); !cmp.Equal(got, []string{"ack-m1", "ack-waiter"}) {
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
// that is withheld at once, and the waiting one gets the room a drain
// makes before anything withheld goes back.
func TestBudgetWaitingIsCapped(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages = 1 }))
	h.r.budgetWait = time.Minute
	run := h.poll()
	recvCtx := h.conn.nextReceive(t)
	deliverN(h.r, run, "m", 1)
	waiter, delivered := h.deliverWaiting(run, msg("waiter", "x"))

	over := &fakeHandle{}
	deliverTo(h.r, run, msg("over", "x"), over, "ack-over") // returns at once
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"over"}) {
		t.Errorf("withheld %v, want [over]", got)
	}
	if got := ackIDsOf(drain(h.r, 10, 0)); !cmp.Equal(got, []string{"ack-m0"}) {
		t.Errorf("drain: %v, want [ack-m0]", got)
	}
	// The room the drain made is the waiter's: nothing withheld goes back.
	over.check(t, "the delivery beyond the wait allowance, after the first drain", 0, 0)
	select {
	case <-delivered:
	case <-time.After(waitLimit):
		t.Fatalf("the waiting delivery was not buffered within %v of the drain that made room", waitLimit)
	}
	if got := ackIDsOf(drain(h.r, 10, 1)); !cmp.Equal(got, []string{"ack-waiter"}) {
		t.Errorf("drain after the wait: %v, want [ack-waiter]", got)
	}
	waiter.check(t, "the delivery that waited", 0, 0)
	over.check(t, "the delivery beyond the wait allowance, after the second drain", 0, 1)
	if isDone(recvCtx) {
		t.Error("the subscriber was stopped")
	}
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

// A delivery still waiting for room when budgetWait runs out is withheld,
// as one crossing the budget without a wait is; one waiting when its
// subscriber is stopped for another reason is refused.
func TestBudgetWaitRunsOutOrRunStops(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages = 1 }))
	h.r.budgetWait = 50 * time.Millisecond
	run := h.poll()
	recvCtx := h.conn.nextReceive(t)
	deliverN(h.r, run, "m", 1)
	over := &fakeHandle{}
	deliverTo(h.r, run, msg("over", "x"), over, "ack-over") // returns after budgetWait
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"over"}) {
		t.Errorf("withheld %v after budgetWait, want [over]", got)
	}
	over.check(t, "the delivery that waited out budgetWait", 0, 0)
	if isDone(recvCtx) {
		t.Error("the subscriber was stopped")
	}

	h.r.budgetWait = time.Minute
	drain(h.r, 10, 0)
	over.check(t, "the withheld delivery after the drain", 0, 1)
	deliverTo(h.r, run, msg("over", "x"), &fakeHandle{}, "ack-over-2") // back, into its room
	waiter, delivered := h.deliverWaiting(run, msg("waiter", "x"))
	h.r.release(nackedRelease)
	checkRefusedAfterWait(t, "the delivery waiting when its split was released", waiter, delivered)
	h.checkUsage(0, 0)
}

func TestBudgetByteLimit(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxBytes = 10 }))
	run := h.poll()
	recvCtx := h.conn.nextReceive(t)
	first := &fakeHandle{}
	// 2 data + 3 ordering key + 1 attribute key + 2 attribute value = 8
	m := &pubsub.Message{ID: "a", Data: []byte("xx"), OrderingKey: "key", Attributes: map[string]string{"k": "vv"}}
	deliverTo(h.r, run, m, first, "ack-a")
	h.checkUsage(1, 8)
	first.check(t, "first delivery", 0, 0)

	over := &fakeHandle{}
	deliverTo(h.r, run, msg("b", "xxx"), over, "ack-b") // 8 + 3 > 10
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"b"}) {
		t.Errorf("withheld %v, want [b]", got)
	}
	if got := ackIDsOf(drain(h.r, 10, 0)); !cmp.Equal(got, []string{"ack-a"}) {
		t.Errorf("drain: %v, want [ack-a]", got)
	}
	over.check(t, "delivery crossing the byte budget, after the drain", 0, 1)
	h.checkCount("messages_nacked_budget", nackedBudget, 1)
	if isDone(recvCtx) {
		t.Error("the subscriber was stopped")
	}
}

func TestBudgetAdmitsOversizedMessageWhenNothingIsBuffered(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxBytes = 10 }))
	run := h.poll()
	recvCtx := h.conn.nextReceive(t)
	big := strings.Repeat("x", 100)
	for i := range 2 {
		fh := &fakeHandle{}
		id := fmt.Sprintf("big%d", i)
		deliverTo(h.r, run, msg(id, big), fh, "ack-"+id)
		fh.check(t, id, 0, 0)
		h.checkUsage(1, 100)
		if got := ackIDsOf(drain(h.r, 10, int64(i))); !cmp.Equal(got, []string{"ack-" + id}) {
			t.Errorf("drain: %v, want [ack-%s]", got, id)
		}
	}
	h.checkCount("messages_nacked_budget", nackedBudget, 0)
	if isDone(recvCtx) {
		t.Error("the subscriber was stopped")
	}

	// With something buffered, a message that does not fit is withheld.
	deliverTo(h.r, run, msg("small", "x"), &fakeHandle{}, "ack-small")
	over := &fakeHandle{}
	deliverTo(h.r, run, msg("big2", big), over, "ack-big2")
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"big2"}) {
		t.Errorf("withheld %v, want [big2]", got)
	}
	over.check(t, "oversized message with something buffered", 0, 0)
}

// Flow control left unset is each stream's share of the buffer budget, at
// most the defaults, so that a worker running every split is never
// sent more than its budget holds; a value that is set is kept.
func TestFlowControlFromBudget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		edit          func(*Config)
		messages, max int
	}{
		{"defaults", nil, 2000, 64 << 20},
		{"acks at checkpoints: the whole share", func(c *Config) { c.Commit, c.ParallelPullCount = CommitFlinkCheckpoint, 2 }, 20000, 64 << 20 / 2},
		{"small budget", func(c *Config) { c.BufferMaxMessages, c.BufferMaxBytes = 10, 1<<20 }, 10, 1 << 20},
		{"twenty-four streams share it", func(c *Config) { c.Subscriptions, c.Splits, c.ParallelPullCount = testSubs(3), 6, 4 }, 1666, 64 << 20 / 24},
		{"per key: one split per subscription", func(c *Config) { c.Subscriptions, c.Ordering, c.BufferMaxMessages = testSubs(4), OrderingPerKey, 100 }, 25, 64 << 20 / 4},
		{"a budget under one message per stream", func(c *Config) { c.Splits, c.BufferMaxMessages, c.BufferMaxBytes = 8, 3, 4 }, 1, 1},
		{"set values kept", func(c *Config) { c.BufferMaxMessages, c.MaxOutstandingMessages, c.MaxOutstandingBytes = 10, 500, -1 }, 500, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.edit)
			if cfg.MaxOutstandingMessages != tc.messages || cfg.MaxOutstandingBytes != tc.max {
				t.Errorf("MaxOutstandingMessages %d and MaxOutstandingBytes %d, want %d and %d", cfg.MaxOutstandingMessages, cfg.MaxOutstandingBytes, tc.messages, tc.max)
			}
		})
	}
}

// A withheld message given back has room kept for it in the budget until
// it comes back: a delivery arriving first cannot take it, so the message
// is not withheld, and given back, a second time. Room kept for one that
// does not come back within returnWait is freed.
func TestReturnedMessageKeepsItsRoom(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.BufferMaxMessages, c.MaxOutstandingMessages = 1, 1000 }))
	run := h.poll()
	h.conn.nextReceive(t)
	deliverN(h.r, run, "m", 1)
	first := &fakeHandle{}
	deliverTo(h.r, run, msg("r", "x"), first, "ack-r-1") // withheld: the budget holds 1
	drain(h.r, 1, 0)                                     // m0 out, r back to Pub/Sub into m0's room
	first.check(t, "r, given back", 0, 1)
	fresh := &fakeHandle{}
	deliverTo(h.r, run, msg("f", "x"), fresh, "ack-f") // arrives first: the room is r's
	if got := withheldIDs(t, h.r); !cmp.Equal(got, []string{"f"}) {
		t.Errorf("withheld %v, want [f]", got)
	}
	again := &fakeHandle{}
	deliverTo(h.r, run, msg("r", "x"), again, "ack-r-2")
	if got := ackIDsOf(drain(h.r, 1, 1)); !cmp.Equal(got, []string{"ack-r-2"}) {
		t.Errorf("drain %v, want r's redelivery", got)
	}
	again.check(t, "r, back", 0, 0)
	h.checkCount("messages_nacked_budget", nackedBudget, 2) // r once, then f into r's old room

	// f does not come back: its room is freed after returnWait.
	h.checkUsage(1, 1)
	h.clock.advance(returnWait + time.Second)
	drain(h.r, 1, 2)
	h.checkUsage(0, 0)
}
