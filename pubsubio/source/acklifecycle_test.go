package source

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSplitReaderAckIsIdempotent(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	hs := deliverN(h.r, run, "m", 3)
	ids := ackIDsOf(drain(h.r, 10, 0))

	// The finalization callback and the next bundle both ack the same IDs.
	if n := ack(h.r, ids); n != 3 {
		t.Errorf("first ack acked %d, want 3", n)
	}
	if n := ack(h.r, ids); n != 0 {
		t.Errorf("second ack acked %d, want 0", n)
	}
	if n := ack(h.r, []string{"ack-unknown"}); n != 0 {
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
	drain(h.r, 1, 0)
	if n := ack(h.r, []string{"ack-m0", "ack-m1", "ack-m2"}); n != 1 {
		t.Errorf("ack acked %d, want 1 (only m0 was emitted)", n)
	}
	hs[0].check(t, "m0", 1, 0)
	hs[1].check(t, "buffered m1", 0, 0)
	hs[2].check(t, "buffered m2", 0, 0)
	if got := ackIDsOf(drain(h.r, 10, 1)); !cmp.Equal(got, []string{"ack-m1", "ack-m2"}) {
		t.Errorf("drain after the ack attempt: %v, want m1 and m2 still buffered", got)
	}
}

// A failed bundle's give-back nacks what it and later bundles emitted,
// through the client and with the RPC.
func TestSplitReaderGiveBackNacksFromSeq(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	hs := deliverN(h.r, run, "m", 6)
	var bySeq [4][]string
	for seq := int64(1); seq <= 3; seq++ {
		bySeq[seq] = ackIDsOf(drain(h.r, 2, seq))
	}
	stillBuffered := &fakeHandle{}
	deliverTo(h.r, run, msg("buffered", "x"), stillBuffered, "ack-buffered")

	h.r.abandonBundle(2)
	stillBuffered.check(t, "message still buffered (never emitted)", 0, 0)
	hs[0].check(t, "m0 (seq 1)", 0, 0)
	hs[1].check(t, "m1 (seq 1)", 0, 0)
	for i := 2; i < 6; i++ {
		hs[i].check(t, fmt.Sprintf("m%d (seq %d)", i, i/2+1), 0, 1)
	}
	h.checkCount("messages_nacked_uncommitted", nackedUncommitted, 4)
	// Before abandonBundle returned, the same give-back went out with the
	// RPC: the client's own batched nack may never be sent.
	if got, want := sorted(h.conn.nackedByRPC()), sorted(append(bySeq[2], bySeq[3]...)); !cmp.Equal(got, want) {
		t.Errorf("nacked by RPC %v, want what seq 2 and 3 emitted, %v", got, want)
	}

	// Giving back again changes nothing; what was given back cannot be acked.
	h.r.abandonBundle(2)
	if n := ack(h.r, append(bySeq[2], bySeq[3]...)); n != 0 {
		t.Errorf("acked %d given-back messages", n)
	}
	if n := ack(h.r, bySeq[1]); n != 2 {
		t.Errorf("acked %d of seq 1, want 2", n)
	}
	hs[0].check(t, "m0 after ack", 1, 0)
	for i := 2; i < 6; i++ {
		hs[i].check(t, fmt.Sprintf("m%d after ack", i), 0, 1)
	}
	h.checkCount("messages_nacked_uncommitted", nackedUncommitted, 4)
	if got := ackIDsOf(drain(h.r, 10, 2)); !cmp.Equal(got, []string{"ack-buffered"}) {
		t.Errorf("drain after giveBack: %v, want the still-buffered message", got)
	}
}

func TestSplitReaderReleaseResendsRecentAcks(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	deliverN(h.r, run, "m", 3)
	deliverTo(h.r, run, msg("noid", "x"), &fakeHandle{}, "") // synthetic ack ID
	drain(h.r, 10, 0)

	ack(h.r, []string{"ack-m0"})
	h.clock.advance(recentAckWindow + time.Second) // m0's ack is surely sent by now
	ack(h.r, []string{"ack-m1", "ack-m2", standInPrefix + "noid"})
	h.clock.advance(recentAckWindow / 2)

	h.r.release(nackedRelease)
	// Only real ack IDs that the client may not have sent yet go out again.
	want := [][]string{{"ack-m1", "ack-m2"}}
	if diff := cmp.Diff(want, h.conn.acknowledged()); diff != "" {
		t.Errorf("acks resent on release (-want +got):\n%s", diff)
	}
}

func TestSplitReaderReleaseWithoutRecentAcksSendsNothing(t *testing.T) {
	h := newReaderHarness(t, testConfig(t, nil))
	run := h.poll()
	deliverN(h.r, run, "m", 2)
	drain(h.r, 10, 0)
	h.r.release(nackedRelease)
	if got := h.conn.acknowledged(); len(got) != 0 {
		t.Errorf("acknowledge called with %v, want no call", got)
	}
}
