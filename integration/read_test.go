package integration

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

func init() {
	register.DoFn1x1[pubsubio.Message, error](&failFirstFn{})
}

// failFirstFn fails the first bundle that reaches it in this process (its
// Marker names the test), so the read's first bundle never commits.
type failFirstFn struct {
	Marker string
}

var failed = map[string]*atomic.Bool{}

func (f *failFirstFn) ProcessElement(m pubsubio.Message) error {
	if failed[f.Marker].CompareAndSwap(false, true) {
		return fmt.Errorf("failing the first bundle on purpose (message %s)", m.ID)
	}
	return nil
}

// (a) Two subscriptions, three splits each, several thousand messages: every
// message is emitted from each subscription, and each count is right.
func TestReadEveryMessageFromEverySubscription(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	const n = 3000
	topic := e.CreateTopic(t, "read-all")
	subA := e.CreateSubscription(t, topic, "read-all-a", 30*time.Second)
	subB := e.CreateSubscription(t, topic, "read-all-b", 30*time.Second)
	ids := e.Publish(t, topic, n, 256, nil)

	subs := []pubsubio.Subscription{subA, subB}
	p, bucket := readInto(t, pubsubio.ReadConfig{
		Subscriptions: subs,
		Splits:        6,
		// Bounded by idleness only: with MaxMessages, a split that reaches
		// its share gives back what it holds beyond it, and on the emulator
		// some of that stays leased until its lease lapses (docs/limits.md, Known
		// limits), which would end the read with those still out.
		IdleTimeout: 10 * time.Second,
		Connection:  pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, nil)
	if err := beamx.Run(context.Background(), p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	got := tally(t, bucket)
	for _, sub := range subs {
		lost, dups := readCheck(t, sub.ID, sub, ids, got)
		t.Logf("%s: %d messages, %d duplicates", sub.ID, n-lost, dups)
	}
}

// (b) A downstream failure in the read's first bundle: nothing it emitted
// is acked, Pub/Sub gets it back, and a second run reads and acks every
// message exactly once.
func TestReadAcksOnlyCommittedBundles(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	const n = 150
	topic := e.CreateTopic(t, "commit")
	subs := []pubsubio.Subscription{e.CreateSubscription(t, topic, "commit", 10*time.Second)}
	ids := e.Publish(t, topic, n, 64, nil)
	cfg := pubsubio.ReadConfig{
		Subscriptions: subs,
		MaxMessages:   n,
		IdleTimeout:   5 * time.Second,
		LeaseIdle:     time.Second, // the failed job's split gives its messages back
		// Bounds the stream's ack deadline, and so how long what pstest
		// sent on the released stream, and its client never read, stays
		// out: 10 s, not the client's 60 s (as in
		// TestReadCancelledGivesBackUncommitted).
		MaxDurationPerAckExtension: 10 * time.Second,
		Connection:                 pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}

	marker := t.Name()
	failed[marker] = &atomic.Bool{}
	p, _ := readInto(t, cfg, func(s beam.Scope, msgs beam.PCollection) {
		beam.ParDo0(s, &failFirstFn{Marker: marker}, msgs)
	})
	err := beamx.Run(context.Background(), p)
	if err == nil {
		t.Fatal("the pipeline with a failing bundle succeeded; want it to fail")
	}
	for _, id := range ids {
		if m := srv.Message(id); m.Acks != 0 {
			t.Errorf("message %s acked %d times by a job whose only bundle failed", id, m.Acks)
		}
	}

	// A message the server had sent on the first job's stream as the
	// release cancelled it never reached the client, so nobody can give it
	// back: it returns when the stream's ack deadline (10 s, above) lapses
	// (in two CI runs 3 of 150 were out). The second run waits that out
	// before it may end idle; MaxMessages ends it as soon as everything
	// was read.
	cfg.IdleTimeout = 20 * time.Second
	// The second run keeps its split for the default LeaseIdle: a 1 s
	// LeaseIdle releases a healthy split whenever a loaded Prism waits over
	// a second between bundles, and the release gives back what was emitted
	// but not yet committed, so Pub/Sub redelivers it and MaxMessages counts
	// the copies.
	cfg.LeaseIdle = 0
	p, bucket := readInto(t, cfg, nil)
	res, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("second run failed: %v", err)
	}
	for _, name := range []string{"messages_emitted", "messages_acked", "acks_via_resume"} {
		if got := counter(res, name); got != n {
			t.Errorf("metric pubsubio/%s = %d, want %d", name, got, n)
		}
	}
	if got := gauge(res, "pending_acks"); got != 0 {
		t.Errorf("metric pubsubio/pending_acks = %d after a finished bounded read, want 0", got)
	}
	got := tally(t, bucket)
	var wrong []string
	for _, id := range ids {
		if m := srv.Message(id); m.Acks != 1 || got[subs[0].ID+"/"+id] == 0 {
			wrong = append(wrong, fmt.Sprintf("%s(acks=%d emitted=%d deliveries=%d)", id, m.Acks, got[subs[0].ID+"/"+id], m.Deliveries))
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		t.Errorf("%d of %d messages not emitted and acked exactly once by the second run: %v", len(wrong), n, wrong[:min(10, len(wrong))])
	}
}

// (c) An unbounded read cancelled through its context: what its committed
// bundles emitted is acked, and everything else comes back to the next run.
func TestReadCancelledGivesBackUncommitted(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	const n = 200
	topic := e.CreateTopic(t, "cancel")
	subs := []pubsubio.Subscription{e.CreateSubscription(t, topic, "cancel", 10*time.Second)}
	ids := e.Publish(t, topic, n, 64, nil)
	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}

	// MaxDurationPerAckExtension bounds the stream's ack deadline, and so
	// how long what pstest sent on the cancelled run's stream, and its
	// client never read, stays out (docs/limits.md, Known limits): 10 s, not the
	// client's 60 s.
	p, first := readInto(t, pubsubio.ReadConfig{
		Subscriptions: subs, LeaseIdle: time.Second, MaxDurationPerAckExtension: 10 * time.Second, Connection: conn,
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- beamx.Run(ctx, p) }()
	if err := collect.Await(first, 2*time.Minute, collect.AtLeast(n/2)); err != nil {
		cancel()
		t.Fatalf("unbounded read: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		t.Logf("cancelled run returned: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the cancelled pipeline did not return within 2 minutes")
	}

	acked := 0
	for _, id := range ids {
		if srv.Message(id).Acks > 0 {
			acked++
		}
	}
	if acked == 0 {
		t.Errorf("no message acked although the cancelled run emitted %d", collect.Len(first))
	}

	// What was stranded on the cancelled run's stream comes back when its
	// 10 s lease lapses: the second run waits twice that for arrivals
	// before it ends.
	p, second := readInto(t, pubsubio.ReadConfig{Subscriptions: subs, IdleTimeout: 20 * time.Second, Connection: conn}, nil)
	if err := beamx.Run(context.Background(), p); err != nil {
		t.Fatalf("second run failed: %v", err)
	}
	one, two := tally(t, first), tally(t, second)
	var lost []string
	for _, id := range ids {
		key := subs[0].ID + "/" + id
		m := srv.Message(id)
		if two[key] == 0 && (one[key] == 0 || m.Acks == 0) {
			lost = append(lost, id)
		}
		if m.Acks == 0 {
			t.Errorf("message %s never acked (first run emitted it %d times, second %d)", id, one[key], two[key])
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d messages neither committed by the first run nor read by the second: %v", len(lost), lost[:min(10, len(lost))])
	}
	t.Logf("first run emitted %d, acked before cancel %d; second run emitted %d", collect.Len(first), acked, collect.Len(second))
}

// A subscription that does not exist fails the job with an error naming it
// and saying what to do, instead of spinning.
func TestReadMissingSubscriptionFailsNamingIt(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	missing := pubsubio.SubscriptionOf(e.Project, "no-such-subscription")
	p, _ := readInto(t, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{missing},
		IdleTimeout:   time.Minute,
		Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, nil)
	wantInError(t, runFails(t, p), missing.String(), "does not exist")
}

// Forcing bundle finalization on Beam Go 2.77, whose harness loses every
// callback after a plan's first bundle: acks do not depend on it, so every
// message is still acked exactly once, partly by callbacks that did run.
func TestReadFinalizationForcedOnDefectiveSDK(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	const n = 150
	topic := e.CreateTopic(t, "finalize")
	sub := e.CreateSubscription(t, topic, "finalize", 10*time.Second)
	ids := e.Publish(t, topic, n, 64, nil)
	p, bucket := readInto(t, pubsubio.ReadConfig{
		Subscriptions:       []pubsubio.Subscription{sub},
		MaxMessages:         n,
		IdleTimeout:         5 * time.Second,
		MaxRecordsPerBundle: 10, // many bundles, so the lost callbacks show
		Finalization:        pubsubio.FinalizationOn,
		Connection:          pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, nil)
	res, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	if got := collect.Len(bucket); got < n {
		t.Errorf("emitted %d messages, want %d", got, n)
	}
	for _, id := range ids {
		if m := srv.Message(id); m.Acks != 1 {
			t.Errorf("message %s acked %d times, want 1", id, m.Acks)
		}
	}
	fin, resume := counter(res, "acks_via_finalization"), counter(res, "acks_via_resume")
	t.Logf("acks via finalization %d, via the next bundle %d", fin, resume)
	if fin+resume != n {
		t.Errorf("acks via finalization (%d) + via the next bundle (%d) = %d, want %d", fin, resume, fin+resume, n)
	}
}
