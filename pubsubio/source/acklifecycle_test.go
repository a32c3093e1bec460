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

// A failed bundle takes back what it and later bundles emitted: the
// message it failed on goes back to Pub/Sub, through the client and with
// the RPC; the rest is buffered again, still leased and in arrival order,
// ahead of what was buffered, for the retry to emit without a redelivery.
// Under OrderingPerKey all of it goes back, so that nothing overtakes the
// redelivery of the failed message.
func TestSplitReaderAbandonKeepsAllButTheFailure(t *testing.T) {
	for _, ordering := range []OrderingMode{OrderingNone, OrderingPerKey} {
		t.Run(string(ordering), func(t *testing.T) {
			h := newReaderHarness(t, testConfig(t, func(c *Config) { c.Ordering = ordering }))
			run := h.poll()
			hs := deliverN(h.r, run, "m", 6)
			var bySeq [4][]*delivery
			for seq := int64(1); seq <= 3; seq++ {
				bySeq[seq] = drain(h.r, 2, seq)
			}
			stillBuffered := &fakeHandle{}
			deliverTo(h.r, run, msg("buffered", "x"), stillBuffered, "ack-buffered")

			failed := bySeq[2][1] // m3
			h.r.abandonBundle(2, failed)
			stillBuffered.check(t, "message still buffered (never emitted)", 0, 0)
			hs[0].check(t, "m0 (seq 1)", 0, 0)
			hs[1].check(t, "m1 (seq 1)", 0, 0)
			hs[3].check(t, "m3, the failure", 0, 1)
			wantRPC, wantAgain := []string{"ack-m3"}, []string{"ack-m2", "ack-m4", "ack-m5", "ack-buffered"}
			requeued, nacked := 3, 1
			if ordering == OrderingPerKey {
				wantRPC, wantAgain = []string{"ack-m2", "ack-m3", "ack-m4", "ack-m5"}, []string{"ack-buffered"}
				requeued, nacked = 0, 4
			}
			for _, i := range []int{2, 4, 5} {
				hs[i].check(t, fmt.Sprintf("m%d (seq %d)", i, i/2+1), 0, int32(nacked/4))
			}
			h.checkCount("messages_nacked_uncommitted", nackedUncommitted, int64(nacked))
			h.checkCount("messages_requeued", messagesRequeued, int64(requeued))
			// Before abandonBundle returned, the give-back went out with the
			// RPC: the client's own batched nack may never be sent.
			if got := sorted(h.conn.nackedByRPC()); !cmp.Equal(got, wantRPC) {
				t.Errorf("nacked by RPC %v, want %v", got, wantRPC)
			}

			// Abandoning again changes nothing; what was taken back cannot be
			// acked, what seq 1 emitted can.
			h.r.abandonBundle(2, nil)
			if n := ack(h.r, ackIDsOf(append(bySeq[2], bySeq[3]...))); n != 0 {
				t.Errorf("acked %d taken-back messages", n)
			}
			if n := ack(h.r, ackIDsOf(bySeq[1])); n != 2 {
				t.Errorf("acked %d of seq 1, want 2", n)
			}
			hs[0].check(t, "m0 after ack", 1, 0)
			if got := ackIDsOf(drain(h.r, 10, 2)); !cmp.Equal(got, wantAgain) {
				t.Errorf("the retry drains %v, want %v", got, wantAgain)
			}
		})
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
