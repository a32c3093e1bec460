//go:build realpubsub

package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Prompt redelivery after release, on the real service. A bounded read
// whose MaxMessages is shared by several splits ends each split at its
// share; what a split holds beyond it is given back with a nack
// (ModifyAckDeadline 0), and the client's shutdown nacks what it had not
// handed over. On the emulator part of that stays leased until the lease
// lapses (docs/limits.md, Known limits). On the service every message the read did
// not emit must be available again at once.
//
// The bound, promptRedelivery, is measured from the moment the first job
// returned to the last arrival at a second reader. Why it separates a
// give-back from a lapsed lease: the read acks within about a second of
// receipt, so the client's adaptive lease stays at its minimum, 10 s, and
// it renews each lease 5 s before it would lapse (pubsub v2.9.0,
// iterator.go: minDurationPerLeaseExtension, gracePeriod). A message the
// read held and did not give back therefore stays leased 5 to 10 s after
// its subscriber stopped, and the last subscribers stop moments before the
// job returns; a nacked one can be delivered to the second reader as soon
// as its stream is open. The subscription's own ack deadline is set to
// 600 s, so nothing can fall back to a longer one unnoticed; it has no
// retry policy, so Pub/Sub delays no redelivery on purpose.
const promptRedelivery = 5 * time.Second

// arrivals receives from sub (a full name) with the raw client, acking
// everything, until every one of want has arrived or timeout passed, and
// returns when each ID first arrived.
func arrivals(t *testing.T, client *pubsub.Client, sub string, want map[string]bool, timeout time.Duration) map[string]time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var mu sync.Mutex
	first := map[string]time.Time{}
	missing := len(want)
	err := client.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		now := time.Now()
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if _, ok := first[m.ID]; ok {
			return
		}
		first[m.ID] = now
		if want[m.ID] {
			if missing--; missing == 0 {
				cancel()
			}
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if missing > 0 {
		var sample []string
		for id := range want {
			if _, ok := first[id]; !ok && len(sample) < 5 {
				sample = append(sample, id)
			}
		}
		t.Fatalf("%s: %d of %d messages the first read did not emit never arrived within %v (Receive: %v); e.g. %v", sub, missing, len(want), timeout, err, sample)
	}
	return first
}

// A bounded read, MaxMessages shared by three splits of one subscription,
// over a backlog twice that: it finishes with exactly its count emitted,
// after giving messages back, and every message it did not emit reaches a
// second reader within promptRedelivery of the job's end.
func TestRealPubSubReleasedMessagesRedeliveredPromptly(t *testing.T) {
	t.Parallel()
	r := newRealPubSub(t)
	topic := r.topic(t, "release")
	sub := r.createSubscription(t, "release", topic, &pubsubpb.Subscription{AckDeadlineSeconds: 600})
	const n, limit, splits = 600, 300, 3
	msgs := make([]*pubsub.Message, n)
	for i := range msgs {
		msgs[i] = &pubsub.Message{Data: fmt.Appendf(nil, "release-%d", i)}
	}
	ids := r.publish(t, topic, false, msgs)

	p, bucket := readInto(t, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{sub},
		Splits:        splits,
		MaxMessages:   limit, // 100 per split
		Connection:    r.conn,
	}, nil)
	res := runWithin(t, p, 3*time.Minute, func() string { return fmt.Sprintf("bounded read, %d emitted", collect.Len(bucket)) })
	end := time.Now()
	if got := counter(res, "messages_emitted"); got != limit {
		t.Errorf("messages_emitted %d, want exactly MaxMessages %d", got, limit)
	}
	givenBack := counter(res, "messages_nacked_release") + counter(res, "messages_nacked_shutdown") + counter(res, "messages_nacked_budget")
	if givenBack == 0 {
		t.Fatalf("no split gave anything back when it finished (messages_nacked_release/shutdown/budget all 0): the case this test is about did not arise")
	}

	emitted := tally(t, bucket)
	rest := map[string]bool{}
	for _, id := range ids {
		if emitted[sub.ID+"/"+id] == 0 {
			rest[id] = true
		}
	}
	got := arrivals(t, r.client, sub.String(), rest, 2*time.Minute)
	var delays []time.Duration
	for id := range rest {
		delays = append(delays, got[id].Sub(end))
	}
	slices.Sort(delays)
	last := delays[len(delays)-1]
	t.Logf("first read: %d emitted, %d given back; %d not emitted reached a second reader %v (median) and %v (last) after the job returned",
		counter(res, "messages_emitted"), givenBack, len(rest), delays[len(delays)/2].Round(time.Millisecond), last.Round(time.Millisecond))
	if last > promptRedelivery {
		t.Errorf("the last message the first read did not emit arrived %v after the job returned, over the %v bound: something it held was not given back and waited for its lease to lapse", last.Round(time.Millisecond), promptRedelivery)
	}
	reread := 0
	for id := range got {
		if !rest[id] {
			reread++
		}
	}
	t.Logf("%d messages the first read had emitted and acked were delivered again before the last of the others arrived", reread)
}
