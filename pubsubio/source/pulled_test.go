package source

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// What the client pulled beyond its flow control and never handed to the
// split is nacked with the RPC before receive returns, so Pub/Sub can
// redeliver it at once instead of after its lease: here the client may
// deliver one message at a time, the first delivery blocks until the stop,
// and pstest sends the whole backlog in its responses.
func TestStoppedSubscriberGivesBackWhatItNeverDelivered(t *testing.T) {
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "giveback", 1)
	ids := f.publish(t, topic, 20, nil)
	cfg := testConfig(t, func(c *Config) {
		c.Subscriptions = subs
		c.Connection = f.conn
		c.MaxOutstandingMessages = 1
	})
	back := newGivenBack(time.Minute, newStats())
	s, err := dialPuller(context.Background(), subs[0], cfg, back)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	cs := s.(*clientPuller)
	// The emulator's stand-in: a shutdown that does not nack the client's
	// inventory (on the Java emulator NackImmediately did not reach it; on
	// pstest it does, which would hide a missing give-back).
	cs.settings.ShutdownOptions = &pubsub.ShutdownOptions{Behavior: pubsub.ShutdownBehaviorWaitForProcessing, Timeout: time.Second}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	first := make(chan struct{})
	var once sync.Once
	var takenID string // written before first is closed
	done := make(chan error, 1)
	go func() {
		done <- s.receive(ctx, func(m *pubsub.Message) bool {
			taken := false
			once.Do(func() { taken = true })
			if !taken {
				// A delivery after the stop, refused as the split refuses one,
				// and not nacked here: the client may never send that nack.
				return false
			}
			takenID = m.ID
			close(first)
			<-ctx.Done() // held by the split until the stop
			m.Ack()
			return true
		})
	}()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery within 30s")
	}
	deadline := time.Now().Add(30 * time.Second)
	for pulledCount(cs.pulled) < 2 { // the delivered message and at least one more
		if time.Now().After(deadline) {
			t.Fatal("the client pulled nothing besides the delivered message within 30s: the case did not arise")
		}
		time.Sleep(10 * time.Millisecond) // polling a count under a bounded deadline, not synchronizing
	}
	var recorded []string // pulled and not delivered: at least these
	for _, id := range pulledIDs(cs.pulled) {
		if id != takenID { // in the set until its callback returns
			recorded = append(recorded, id)
		}
	}
	stop()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("receive did not return within 30s of the stop")
	}

	// Each of them must have been nacked (a zero ack deadline) by the time
	// receive returned.
	nackedByServer := map[string]bool{}
	for _, m := range f.srv.Messages() {
		for _, ma := range m.Modacks {
			if ma.AckDeadline == 0 {
				nackedByServer[m.ID] = true
			}
		}
	}
	var missing []string
	for _, id := range recorded {
		if !nackedByServer[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d messages pulled but never delivered were not nacked when receive returned: %v", len(missing), len(recorded), missing)
	}
	t.Logf("%d of %d published messages were pulled and not delivered when the subscriber stopped", len(recorded), len(ids))
	if n := pulledCount(cs.pulled); n != 0 {
		t.Errorf("%d ack IDs still recorded after the give-back", n)
	}
	// And the read remembers them, to hold its watermark until they are
	// back: pstest's publish times are all now, within the test.
	if got := back.oldest(time.Now()); len(recorded) > 0 && got.IsZero() {
		t.Errorf("the give-back of %d messages left nothing for the watermark to hold", len(recorded))
	}
}

func pulledIDs(p *pulled) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for id := range p.msgs {
		ids = append(ids, id)
	}
	return ids
}

func pulledCount(p *pulled) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs)
}
