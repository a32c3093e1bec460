package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/go-cmp/cmp"
)

func TestSplitReaderReleaseNacksEverythingHeld(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	recvCtx := h.conn.nextReceive(t)
	hs := deliverN(h.r, run, "m", 4)
	pendingIDs := ackIDsOf(drain(h.r, 2, 0)) // m0, m1 pending; m2, m3 buffered

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
	if got, want := h.conn.nackedByRPC(), []string{"ack-m2", "ack-m3", "ack-m0", "ack-m1"}; !cmp.Equal(sorted(got), sorted(want)) {
		t.Errorf("nacked with the RPC %v, want %v", got, want)
	}
	awaitDone(t, "released split", recvCtx)
	if got := h.conn.closeCount(); got != 1 {
		t.Errorf("subscription closed %d times, want 1", got)
	}

	// The bundle that emitted m0 and m1 commits afterwards: its acks do
	// nothing, the messages were given back.
	if n := ack(h.r, pendingIDs); n != 0 {
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
	if got := h.conn.closeCount(); got != 1 {
		t.Errorf("subscription closed %d times after a second release, want 1", got)
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
	h.conn.nextReceive(t)
	h.r.release(nackedRelease)

	err := poll(h.r)
	h.r.mu.Lock()
	running := h.r.running != nil
	h.r.mu.Unlock()
	if running {
		t.Errorf("poll after release (returned %v) started a subscriber on the released split (dialed %d times)", err, h.dials.Load())
		h.conn.nextReceive(t)
	}
	h.conn.noMoreReceives(t)
}

// A subscriber that stops by itself (a permanent stream error) gives back
// what it held and reports the failure once, naming the subscription.
func TestSplitReaderSubscriberFailure(t *testing.T) {
	cfg := testConfig(t, nil)
	sub := &failingSub{fakePuller: newFakePuller(), fail: make(chan error, 1)}
	r := newSplitReader(Split{Subscription: cfg.Subscriptions[0]}, cfg, newReadState(cfg), newFakeClock().now,
		func(context.Context) (puller, error) { return sub, nil })
	t.Cleanup(func() { r.release(nackedRelease) })
	run := pollRun(t, r)
	nacked := make(chan string, 2)
	hs := make([]*fakeHandle, 2)
	for i := range hs {
		hs[i] = &fakeHandle{}
		id := fmt.Sprintf("m%d", i)
		deliverTo(r, run, msg(id, "x"), notifyingHandle{hs[i], id, nacked}, "ack-"+id)
	}
	drain(r, 1, 0)

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
	err := poll(r)
	if err == nil || !strings.Contains(err.Error(), "stream broke") || !strings.Contains(err.Error(), cfg.Subscriptions[0].String()) {
		t.Errorf("poll after the failure: %v, want the stream error naming the subscription", err)
	}
	if err := poll(r); err != nil {
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
	*fakePuller
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
