package source

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

func TestMain(m *testing.M) {
	ptest.Main(m)
}

// A bounded read on Prism against pstest emits every message, and after the
// run every message is acked exactly once.
func TestReadBoundedOnPrismAcksEverything(t *testing.T) {
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "bounded", 2)
	ids := f.publish(t, topic, 200, nil)

	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, Config{
		Subscriptions: subs,
		Splits:        3,
		MaxMessages:   200,
		// Longer than pstest's 60 s lease: sub-0's two splits share its 200,
		// and what the server had sent to the stream of the one that finishes
		// first, unread, returns only when that lease lapses
		// (docs/limits.md). The read ends at its shares, not by idleness.
		IdleTimeout: 2 * time.Minute,
		Connection:  f.conn,
	})
	passert.Count(s, msgs, "messages", 400)
	if err := ptest.Run(p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	for _, id := range ids {
		m := f.srv.Message(id)
		if m.Acks < 2 { // one per subscription
			t.Errorf("message %s: %d acks, %d deliveries; want 2 acks", id, m.Acks, m.Deliveries)
		}
	}
}
