//go:build realpubsub

package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Per-key ordering on the real service: the emulator does not dispatch
// per ordering key, so only here can a PER_KEY read show that each key's
// messages reach the pipeline in publish order.

func init() {
	register.Function1x1(keyedPayload)
}

// keyedPayload records what a read emitted as "<ordering key>|<payload>";
// orderedMessages' payloads are "<key>/<sequence>".
func keyedPayload(m pubsubio.Message) string { return m.OrderingKey + "|" + string(m.Data) }

// orderedMessages returns keys*perKey messages, the keys interleaved, each
// key's sequence numbers rising from 0 in publish order.
func orderedMessages(keys, perKey int) []*pubsub.Message {
	var msgs []*pubsub.Message
	for i := range perKey {
		for k := range keys {
			key := fmt.Sprintf("key-%d", k)
			msgs = append(msgs, &pubsub.Message{Data: fmt.Appendf(nil, "%s/%d", key, i), OrderingKey: key})
		}
	}
	return msgs
}

// readOrdered runs a PER_KEY read of sub under cfg (its Subscriptions and
// Ordering are set here) on Prism, within 5 minutes, and returns, per
// ordering key, the sequence numbers in the order the pipeline saw them,
// with the job's metrics. The collecting step is fused into the
// read's bundles (Prism runs it inside emit), so that order is the read's
// emission order.
func readOrdered(t *testing.T, sub pubsubio.Subscription, cfg pubsubio.ReadConfig) (map[string][]int, beam.PipelineResult) {
	t.Helper()
	cfg.Subscriptions = []pubsubio.Subscription{sub}
	cfg.Ordering = pubsubio.OrderingPerKey
	p, s := beam.NewPipelineWithRoot()
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, beam.ParDo(s, keyedPayload, pubsubio.Read(s, cfg)))
	res := runWithin(t, p, 5*time.Minute, func() string { return fmt.Sprintf("PER_KEY read of %s, %d emitted", sub, collect.Len(bucket)) })
	items, err := collect.ItemsOf[string](bucket)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]int{}
	for _, it := range items {
		orderingKey, payload, _ := strings.Cut(it, "|")
		key, seq, _ := strings.Cut(payload, "/")
		n, err := strconv.Atoi(seq)
		if err != nil || key != orderingKey {
			t.Fatalf("emitted %q: want ordering key K and payload K/<sequence>", it)
		}
		seen[key] = append(seen[key], n)
	}
	return seen, res
}

// wantPublishOrder checks that every key's messages 0..perKey-1 were seen
// and never out of order: each sequence number is at most one past the
// highest seen before it. A number at or below the highest is a
// redelivery, which Pub/Sub makes in order from the redelivered message on,
// so at-least-once duplicates pass and a message overtaking an earlier one
// of its key fails. Returns how many redeliveries were seen.
func wantPublishOrder(t *testing.T, what string, seen map[string][]int, keys, perKey int) int {
	t.Helper()
	redelivered := 0
keys:
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		high := -1
		for i, n := range seen[key] {
			if n > high+1 {
				t.Errorf("%s: %s: message %d was emitted before message %d (position %d of %v)", what, key, n, high+1, i, seen[key])
				continue keys
			}
			if n <= high {
				redelivered++
			}
			high = max(high, n)
		}
		if high != perKey-1 {
			t.Errorf("%s: %s: the highest message emitted is %d, want %d (emitted %v)", what, key, high, perKey-1, seen[key])
		}
	}
	if len(seen) != keys {
		t.Errorf("%s: %d ordering keys emitted, want %d", what, len(seen), keys)
	}
	return redelivered
}

// Several keys, published interleaved with ordering keys to an
// ordering-enabled subscription, read under PER_KEY: the pipeline sees each
// key's messages in publish order, and all of them.
func TestRealPubSubPerKeyOrderingEndToEnd(t *testing.T) {
	t.Parallel()
	r := newRealPubSub(t)
	topic := r.topic(t, "per-key")
	sub := r.createSubscription(t, "per-key", topic, &pubsubpb.Subscription{EnableMessageOrdering: true})
	const keys, perKey = 8, 100
	r.publish(t, topic, true, orderedMessages(keys, perKey))

	seen, res := readOrdered(t, sub, pubsubio.ReadConfig{
		// Bounded by idleness, not by count: a redelivery counts towards
		// MaxMessages and could end the read before the last messages.
		IdleTimeout: 20 * time.Second,
		// Small bundles, so that each key's messages span many bundles and
		// acks; order has to hold across them.
		MaxRecordsPerBundle: 50,
		Connection:          r.conn,
	})
	redelivered := wantPublishOrder(t, "PER_KEY read", seen, keys, perKey)
	t.Logf("%d keys x %d messages: %d emitted, %d redeliveries", keys, perKey, counter(res, "messages_emitted"), redelivered)
}

// A seek to a timestamp on an ordering-enabled subscription, under
// PER_KEY (the emulator answers UNIMPLEMENTED). The backlog is first read
// and acked by a pubsubio job, whose subscribers shut down nacking what
// they hold: on the emulator, a later seek then restores only part of the
// acked messages (ackedBacklogNote, prepare_test.go); the service must
// restore all of them, in order per key.
func TestRealPubSubSeekToTimestampOnOrderedSubscription(t *testing.T) {
	t.Parallel()
	r := newRealPubSub(t)
	topic := r.topic(t, "ordered-seek")
	sub := r.createSubscription(t, "ordered-seek", topic, &pubsubpb.Subscription{EnableMessageOrdering: true, RetainAckedMessages: true})
	// Margin for the difference between this clock and the service's.
	before := time.Now().Add(-5 * time.Second)
	const keys, perKey = 4, 50
	r.publish(t, topic, true, orderedMessages(keys, perKey))

	first, _ := readOrdered(t, sub, pubsubio.ReadConfig{IdleTimeout: 20 * time.Second, Connection: r.conn})
	wantPublishOrder(t, "first read", first, keys, perKey)

	replayed, res := readOrdered(t, sub, pubsubio.ReadConfig{
		Setup:       []pubsubio.SubscriptionSetup{{Subscription: sub, Start: pubsubio.StartFromTimestamp(before)}},
		MaxMessages: keys * perKey,
		// Pub/Sub applies a seek asynchronously, within about a minute: an
		// idle spell that long is not yet the end of the replay.
		IdleTimeout: 2 * time.Minute,
		Connection:  r.conn,
	})
	redelivered := wantPublishOrder(t, "replay after the seek", replayed, keys, perKey)
	if got := counter(res, "seeks_performed"); got != 1 {
		t.Errorf("seeks_performed %d, want 1", got)
	}
	t.Logf("replayed %d messages after the seek, %d redeliveries", counter(res, "messages_emitted"), redelivered)
}
