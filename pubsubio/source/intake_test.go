package source

import (
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestSplitReaderDeliverAndDrain(t *testing.T) {
	cfg := testConfig(t, nil)
	h := newReaderHarness(t, cfg)
	run := h.poll()
	h.conn.nextReceive(t)

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

	first := drain(h.r, 2, 7)
	rest := drain(h.r, 100, 8)
	if got, want := ackIDsOf(first), []string{"ack-full", standInPrefix + "m-noid"}; !cmp.Equal(got, want) {
		t.Errorf("first drain: %v, want %v", got, want)
	}
	if got, want := ackIDsOf(rest), []string{"ack-m0", "ack-m1", "ack-m2"}; !cmp.Equal(got, want) {
		t.Errorf("second drain: %v, want %v (arrival order)", got, want)
	}
	if len(drain(h.r, 100, 9)) != 0 {
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

	got := drain(h.r, 10, 0)
	if ids := ackIDsOf(got); !cmp.Equal(ids, []string{"ack-2"}) {
		t.Fatalf("drained %v, want only the fresh copy [ack-2]", ids)
	}
	if n := ack(h.r, []string{"ack-1", "ack-2"}); n != 1 {
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
	if ids := ackIDsOf(drain(h.r, 10, 0)); !cmp.Equal(ids, []string{"ack-1"}) {
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

	if ids := ackIDsOf(drain(h.r, 10, 1)); !cmp.Equal(ids, []string{"ack-2"}) {
		t.Fatalf("second drain %v, want the fresh copy [ack-2] once more", ids)
	}
	if len(drain(h.r, 10, 2)) != 0 {
		t.Error("the fresh copy was drained twice")
	}
	if n := ack(h.r, []string{"ack-1"}); n != 0 {
		t.Errorf("the committed bundle acked %d stale copies", n)
	}
	if n := ack(h.r, []string{"ack-2"}); n != 1 {
		t.Errorf("acked %d fresh copies, want 1", n)
	}
	stale.check(t, "stale copy at the end", 0, 1)
	fresh.check(t, "fresh copy at the end", 1, 0)
}
