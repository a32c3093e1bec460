package emulator

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// TestContainerEmulator starts the emulator through the container path
// explicitly (whatever binary this machine has), publishes through the
// fixtures and pulls the messages back with a streaming-pull Subscriber.
// Without a Docker engine or the image (scripts/emulator-image.sh) it
// skips, or fails under PUBSUB_IT_REQUIRE=1.
func TestContainerEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	start := time.Now()
	e, err := startContainer(ctx)
	if err != nil {
		if !errors.Is(err, ErrUnavailable) || truthy(os.Getenv(EnvRequire)) {
			t.Fatalf("container emulator: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stop the emulator container: %v", err)
		}
	})
	t.Logf("container emulator %s at %s ready in %v", containerImage(), e.Endpoint, time.Since(start).Round(time.Millisecond))
	if e.Kind != KindContainer {
		t.Fatalf("kind %q, want %q", e.Kind, KindContainer)
	}

	topic := e.CreateTopic(t, "container")
	sub := e.CreateSubscription(t, topic, "container", 10*time.Second)
	const n, size = 50, 32
	ids := e.Publish(t, topic, n, size, func(i int) map[string]string {
		return map[string]string{"i": strconv.Itoa(i)}
	})

	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	var (
		mu  sync.Mutex
		got = map[int]bool{}
		bad []string
	)
	err = e.Client(t).Subscriber(sub.String()).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		i, err := strconv.Atoi(m.Attributes["i"])
		if err != nil || i < 0 || i >= n || string(m.Data) != string(Payload(i, size)) || m.ID != ids[i] {
			bad = append(bad, m.ID)
			return
		}
		got[i] = true
		if len(got) == n {
			rcancel()
		}
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n || len(bad) > 0 {
		t.Fatalf("pulled %d of %d messages before the deadline; unexpected: %v", len(got), n, bad)
	}
	t.Logf("published and pulled %d messages through the container in %v", n, time.Since(start).Round(time.Millisecond))
}
