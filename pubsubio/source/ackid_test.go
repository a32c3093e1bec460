package source

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// clientAckID reads a field the client keeps unexported; this pins the field
// path against a real (pstest) server, so a client upgrade that moves it
// fails here.
func TestAckIDOfAgainstPstest(t *testing.T) {
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "ackid", 1)
	ids := f.publish(t, topic, 1, nil)
	subName := subs[0].String()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recvCtx, stop := context.WithCancel(ctx)
	defer stop()

	type result struct {
		msgID, ackID string
		ackErr       error
	}
	results := make(chan result, 1)
	var once sync.Once
	sub := f.client.Subscriber(subName)
	sub.ReceiveSettings.ShutdownOptions = &pubsub.ShutdownOptions{Timeout: 5 * time.Second, Behavior: pubsub.ShutdownBehaviorNackImmediately}
	received := make(chan error, 1)
	go func() {
		received <- sub.Receive(recvCtx, func(_ context.Context, m *pubsub.Message) {
			once.Do(func() {
				// Ack by ID with the RPC while the client still holds the
				// message, as a residual resumed in another process does.
				r := result{msgID: m.ID, ackID: clientAckID(m)}
				if r.ackID != "" {
					r.ackErr = f.client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{
						Subscription: subName,
						AckIds:       []string{r.ackID},
					})
				}
				results <- r
				stop()
			})
			// Settle it with the client too (a no-op for the server once
			// acked): a message the client still holds keeps its Receive
			// from returning until MaxExtension, which hung this test in CI.
			m.Nack()
		})
	}()
	var err error
	select {
	case err = <-received:
	case <-time.After(time.Minute):
		t.Fatal("Receive did not return within a minute of its context's cancellation")
	}
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	var r result
	select {
	case r = <-results:
	default:
		t.Fatalf("Receive returned (context: %v) without delivering the message", ctx.Err())
	}
	if r.msgID != ids[0] {
		t.Fatalf("received message %q, published %q", r.msgID, ids[0])
	}
	if r.ackID == "" {
		t.Fatal("clientAckID returned \"\" for a message received from the server: the client's field path changed")
	}
	if r.ackErr != nil {
		t.Fatalf("Acknowledge(%q): %v", r.ackID, r.ackErr)
	}
	if m := f.srv.Message(ids[0]); m == nil || m.Acks != 1 {
		t.Fatalf("pstest message after acking by ID: %+v, want exactly 1 ack", m)
	}
}

// A message whose ack ID cannot be read gets a stand-in, which only the
// held message can ack: the RPCs never see it.
func TestAckIDOfWithoutHandler(t *testing.T) {
	m := &pubsub.Message{ID: "m", Data: []byte("x")}
	if got := clientAckID(m); got != "" {
		t.Errorf("clientAckID(hand-made message) = %q, want \"\"", got)
	}
	if got := clientAckID(nil); got != "" {
		t.Errorf("clientAckID(nil) = %q, want \"\"", got)
	}
	id := ackIDOf(m)
	if id == "" || id.remote() {
		t.Errorf("ackIDOf(hand-made message) = %q (remote %v), want a stand-in", id, id.remote())
	}
	if got := remoteAckIDs([]ackID{"real-1", id, "real-2"}); !slices.Equal(got, []string{"real-1", "real-2"}) {
		t.Errorf("remoteAckIDs kept %v, want the two real IDs", got)
	}
}
