package emulator_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

func TestMain(m *testing.M) { emulator.Main(m) }

// TestRoundTrip publishes 100 messages through the fixtures and receives
// them back with a real streaming-pull Subscriber.
func TestRoundTrip(t *testing.T) {
	e := emulator.Require(t)
	topic := e.CreateTopic(t, "roundtrip")
	sub := e.CreateSubscription(t, topic, "roundtrip", 10*time.Second)

	const n, size = 100, 64
	ids := e.Publish(t, topic, n, size, func(i int) map[string]string {
		return map[string]string{"i": strconv.Itoa(i)}
	})
	if len(ids) != n || len(uniq(ids)) != n {
		t.Fatalf("Publish returned %d ids (%d distinct), want %d distinct", len(ids), len(uniq(ids)), n)
	}

	client := e.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var (
		mu       sync.Mutex
		got      = map[int]bool{}
		problems []string
	)
	err := client.Subscriber(sub.String()).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		i, err := strconv.Atoi(m.Attributes["i"])
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("message %s: bad attribute i=%q", m.ID, m.Attributes["i"]))
		case string(m.Data) != string(emulator.Payload(i, size)):
			problems = append(problems, fmt.Sprintf("message %d: data %q", i, m.Data))
		case m.ID != ids[i]:
			problems = append(problems, fmt.Sprintf("message %d: id %s, Publish said %s", i, m.ID, ids[i]))
		}
		got[i] = true
		if len(got) == n {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n || len(problems) > 0 {
		var missing []int
		for i := range n {
			if !got[i] {
				missing = append(missing, i)
			}
		}
		t.Fatalf("received %d of %d distinct messages before the deadline; missing (first 10): %v; problems: %v",
			len(got), n, missing[:min(10, len(missing))], problems)
	}
}

// TestClientIgnoresPubsubEmulatorHost proves Client does not depend on
// PUBSUB_EMULATOR_HOST, which connector tests point at dead addresses.
func TestClientIgnoresPubsubEmulatorHost(t *testing.T) {
	e := emulator.Require(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
	topic := e.CreateTopic(t, "envhost")
	client := e.Client(t)

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if _, err := client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topic.String()}); err != nil {
		t.Fatalf("GetTopic with PUBSUB_EMULATOR_HOST=127.0.0.1:1: %v", err)
	}
	p := client.Publisher(topic.String())
	defer p.Stop()
	id, err := p.Publish(ctx, &pubsub.Message{Data: []byte("x")}).Get(ctx)
	if err != nil {
		t.Fatalf("Publisher.Publish with PUBSUB_EMULATOR_HOST=127.0.0.1:1: %v", err)
	}
	t.Logf("published %s via %s", id, e.Endpoint)
}

// TestPublishLarge checks Publish's batching keeps 50,000 1 KiB messages fast.
func TestPublishLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 50 MB; skipped with -short")
	}
	e := emulator.Require(t)
	topic := e.CreateTopic(t, "large")
	e.CreateSubscription(t, topic, "large", 0) // so the emulator retains them
	start := time.Now()
	ids := e.Publish(t, topic, 50_000, 1024, nil)
	elapsed := time.Since(start)
	if d := len(uniq(ids)); d != 50_000 {
		t.Fatalf("got %d distinct message ids, want 50000", d)
	}
	t.Logf("published 50000 x 1 KiB in %v (%.0f msg/s)", elapsed.Round(time.Millisecond), 50_000/elapsed.Seconds())
}

func uniq(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

// TestFake: the fixtures work against the in-process pstest server, which
// exposes per-message state.
func TestFake(t *testing.T) {
	e, srv := emulator.Fake(t)
	topic := e.CreateTopic(t, "fake")
	e.CreateSubscription(t, topic, "fake", 0)
	ids := e.Publish(t, topic, 10, 16, nil)
	for i, id := range ids {
		m := srv.Message(id)
		if m == nil || string(m.Data) != string(emulator.Payload(i, 16)) || m.Acks != 0 {
			t.Fatalf("pstest message %s (index %d) = %+v, want payload %q and 0 acks", id, i, m, emulator.Payload(i, 16))
		}
	}
}
