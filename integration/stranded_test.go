package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

// The emulator's part in every late redelivery these tests wait for, with
// the raw client and no connector: a subscriber stopped early leaves
// messages it never read unavailable to the next subscriber until the
// emulator gives them back, in bursts, minutes later. docs/limits.md
// and RELIABILITY.md cite what this test logs.
const (
	strandedBacklog = 20_000
	strandedSize    = 4096
	strandedTake    = 500              // what the first subscriber acks before it stops
	strandedBound   = 10 * time.Minute // bound on every message coming back
)

func TestEmulatorStrandsWhatAStoppedStreamWasSent(t *testing.T) {
	t.Parallel()
	longTests(t)
	e := emulator.Require(t)
	topic := e.CreateTopic(t, "stranded")
	sub := e.CreateSubscription(t, topic, "stranded", 10*time.Second)
	e.Publish(t, topic, strandedBacklog, strandedSize, nil)

	// The first subscriber acks strandedTake messages and stops at the next
	// one; its shutdown nacks what it received and did not ack.
	var mu sync.Mutex
	acked := map[string]bool{}
	received := 0
	first := e.Client(t).Subscriber(sub.String())
	first.ReceiveSettings.NumGoroutines = 1
	first.ReceiveSettings.ShutdownOptions = &pubsub.ShutdownOptions{Timeout: 10 * time.Second, Behavior: pubsub.ShutdownBehaviorNackImmediately}
	ctx, stop := context.WithCancel(context.Background())
	if err := first.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		mu.Lock()
		defer mu.Unlock()
		received++
		if len(acked) < strandedTake {
			acked[m.ID] = true
			m.Ack()
			return
		}
		m.Nack()
		stop()
	}); err != nil {
		t.Fatalf("first subscriber: %v", err)
	}
	stop()
	t.Logf("first subscriber: %d messages received, %d acked, the rest nacked", received, len(acked))

	// A second subscriber acks everything; every gap of more than 5 s in
	// its arrivals is logged with what had arrived by then.
	want := strandedBacklog - len(acked)
	seen := map[string]bool{}
	start := time.Now()
	last := start
	var bursts []time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), strandedBound)
	defer cancel()
	second := e.Client(t).Subscriber(sub.String())
	if err := second.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if acked[m.ID] || seen[m.ID] {
			return
		}
		now := time.Now()
		if now.Sub(last) > 5*time.Second {
			bursts = append(bursts, now.Sub(start).Round(time.Second))
			t.Logf("after a %v gap: %d of %d back at %v", now.Sub(last).Round(time.Second), len(seen), want, now.Sub(start).Round(time.Second))
		}
		last = now
		seen[m.ID] = true
		if len(seen) == want {
			cancel()
		}
	}); err != nil {
		t.Fatalf("second subscriber: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("STRANDED second subscriber: %d of %d back, the last at %v; bursts after gaps began at %v", len(seen), want, last.Sub(start).Round(time.Second), bursts)
	if len(seen) != want {
		t.Errorf("%d of %d messages came back within %v", len(seen), want, strandedBound)
	}
}
