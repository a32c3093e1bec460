package emulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var nameSeq atomic.Int64

// uniqueID returns prefix-<pid>-<seq>-<random>: unique within the binary and
// across binaries sharing one external emulator. Resource ids must start with
// a letter and may contain [A-Za-z0-9-_.~+%]; anything else becomes '-'.
func uniqueID(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-_.~+%", r):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	p := b.String()
	if p == "" || !(p[0] >= 'a' && p[0] <= 'z' || p[0] >= 'A' && p[0] <= 'Z') {
		p = "t" + p
	}
	if len(p) > 180 {
		p = p[:180]
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("%s-%d-%d-%s", p, os.Getpid(), nameSeq.Add(1), hex.EncodeToString(rnd[:]))
}

// The fixtures name resources with model.Topic and model.Subscription,
// which package pubsubio re-exports as aliases (pubsubio.Topic and
// pubsubio.Subscription are the same types), so what they return goes
// straight into a ReadConfig or WriteConfig. model, a leaf package, keeps
// this harness free of Beam.

// CreateTopic creates a topic with a unique id derived from prefix and
// returns its name. It is deleted when the test finishes.
func (e *Emulator) CreateTopic(t testing.TB, prefix string) model.Topic {
	t.Helper()
	c, err := e.adminClient()
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	topic := model.TopicOf(e.Project, uniqueID(prefix))
	name := topic.String()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name}); err != nil {
		t.Fatalf("emulator: create topic %s on %s: %v", name, e.Endpoint, err)
	}
	t.Cleanup(func() {
		e.cleanup(t, "topic "+name, func(ctx context.Context, c *pubsub.Client) error {
			return c.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: name})
		})
	})
	return topic
}

// CreateSubscription creates a pull subscription to topic with a unique id
// derived from prefix and returns its name. ackDeadline 0 means the service
// default (10 s); otherwise it must be whole seconds in [10s, 600s]. It is
// deleted when the test finishes.
func (e *Emulator) CreateSubscription(t testing.TB, topic model.Topic, prefix string, ackDeadline time.Duration) model.Subscription {
	t.Helper()
	if ackDeadline != 0 && (ackDeadline < 10*time.Second || ackDeadline > 600*time.Second || ackDeadline%time.Second != 0) {
		t.Fatalf("emulator: CreateSubscription: ack deadline %v must be 0 or whole seconds between 10s and 600s", ackDeadline)
	}
	c, err := e.adminClient()
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	sub := model.SubscriptionOf(e.Project, uniqueID(prefix))
	name := sub.String()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	req := &pubsubpb.Subscription{
		Name:                     name,
		Topic:                    topic.String(),
		AckDeadlineSeconds:       int32(ackDeadline / time.Second),
		MessageRetentionDuration: durationpb.New(time.Hour),
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, req); err != nil {
		t.Fatalf("emulator: create subscription %s to %s on %s: %v", name, topic, e.Endpoint, err)
	}
	t.Cleanup(func() {
		e.cleanup(t, "subscription "+name, func(ctx context.Context, c *pubsub.Client) error {
			return c.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: name})
		})
	})
	return sub
}

// cleanup runs a delete in t.Cleanup. Failures are logged, not fatal: the
// test may have stopped or restarted its emulator, and NotFound is fine.
func (e *Emulator) cleanup(t testing.TB, what string, del func(context.Context, *pubsub.Client) error) {
	c, err := e.adminClient()
	if err != nil {
		t.Logf("emulator: cleanup: cannot delete %s: %v", what, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := del(ctx, c); err != nil && status.Code(err) != codes.NotFound {
		t.Logf("emulator: cleanup: delete %s on %s: %v", what, e.Endpoint, err)
	}
}

// Payload is the data of message i as published by Publish: the decimal
// index followed by '.' padding up to size bytes (truncated if size is
// smaller than the index's digits).
func Payload(i, size int) []byte {
	b := make([]byte, size)
	n := copy(b, strconv.Itoa(i))
	for j := n; j < size; j++ {
		b[j] = '.'
	}
	return b
}

// Publish limits: one request carries at most 1000 messages and 10 MB.
const (
	maxBatchMessages = 1000
	maxBatchBytes    = 9 << 20 // headroom under the 10 MB request limit
	publishWorkers   = 4
)

// Publish publishes n messages to topic; message i carries
// Payload(i, size) and attrs(i) (attrs may be nil). It sends requests of up
// to 1000 messages / 9 MiB from a few concurrent workers, waits for every
// one, and returns the server-assigned message ids indexed like the
// messages. Any failure fails the test, saying how many were published.
func (e *Emulator) Publish(t testing.TB, topic model.Topic, n, size int, attrs func(i int) map[string]string) []string {
	t.Helper()
	if n <= 0 {
		return nil
	}
	c, err := e.adminClient()
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	type batch struct{ from, to int }
	var batches []batch
	for from := 0; from < n; {
		to, bytes := from, 0
		for to < n && to-from < maxBatchMessages && (to == from || bytes+size <= maxBatchBytes) {
			bytes += size
			to++
		}
		batches = append(batches, batch{from, to})
		from = to
	}

	// Budget: generous per-message time on top of a fixed allowance.
	timeout := 30*time.Second + time.Duration(n)*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ids := make([]string, n)
	work := make(chan batch)
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		firstErr  error
		published int
	)
	for w := 0; w < min(publishWorkers, len(batches)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				req := &pubsubpb.PublishRequest{Topic: topic.String(), Messages: make([]*pubsubpb.PubsubMessage, 0, b.to-b.from)}
				for i := b.from; i < b.to; i++ {
					m := &pubsubpb.PubsubMessage{Data: Payload(i, size)}
					if attrs != nil {
						m.Attributes = attrs(i)
					}
					req.Messages = append(req.Messages, m)
				}
				res, err := c.TopicAdminClient.Publish(ctx, req)
				if err == nil && len(res.GetMessageIds()) != b.to-b.from {
					err = fmt.Errorf("server returned %d message ids for %d messages", len(res.GetMessageIds()), b.to-b.from)
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("messages [%d,%d): %w", b.from, b.to, err)
						cancel()
					}
				} else {
					copy(ids[b.from:b.to], res.GetMessageIds())
					published += b.to - b.from
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
feed:
	for _, b := range batches {
		select {
		case work <- b:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		t.Fatalf("emulator: publish to %s on %s: %d of %d messages published in %v (budget %v): %v",
			topic, e.Endpoint, published, n, time.Since(start).Round(time.Millisecond), timeout, firstErr)
	}
	return ids
}
