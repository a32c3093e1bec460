package source

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Delivery attempts spent on healthy messages. Pub/Sub counts a delivery
// attempt for every delivery: after each nack and each lease that lapsed.
// A subscription with a dead-letter policy forwards a message once it used
// up MaxDeliveryAttempts, whether or not anything failed. These tests run
// the read on Prism against pstest, which honours a dead-letter policy the
// same way (pstest/fake.go: deadLetterCandidate; the emulator does too,
// RELIABILITY.md), through the scenarios where the read gives messages back
// without their own failure, and count what pstest delivered: a message
// delivered attemptsLimit times and not acked is dead-lettered.

func init() {
	register.DoFn2x0[model.Message, func(model.Message)](&slowStage{})
	register.DoFn2x0[model.Message, func(model.Message)](&stallingStage{})
}

// attemptsLimit is the dead-letter policy's MaxDeliveryAttempts: Pub/Sub's
// minimum and default.
const attemptsLimit = 5

// slowStage passes each message on after Delay: a downstream stage slower
// than the subscription's arrivals, so the read's buffer budget fills.
type slowStage struct{ Delay time.Duration }

func (f *slowStage) ProcessElement(m model.Message, emit func(model.Message)) {
	time.Sleep(f.Delay)
	emit(m)
}

// stalls counts, per stallingStage.Name, the messages the stage saw.
var stalls sync.Map // string -> *atomic.Int64

// stallingStage passes messages on and stalls for Stall at every Every-th
// message it sees in the process: a downstream stage that now and then
// takes longer than the read's LeaseIdle (a slow write, a long GC pause).
type stallingStage struct {
	Name  string
	Every int64
	Stall time.Duration
}

func (f *stallingStage) ProcessElement(m model.Message, emit func(model.Message)) {
	c, _ := stalls.LoadOrStore(f.Name, new(atomic.Int64))
	if c.(*atomic.Int64).Add(1)%f.Every == 0 {
		time.Sleep(f.Stall)
	}
	emit(m)
}

// attemptsTopic is a subscription on pstest with a dead-letter policy of
// attemptsLimit, holding n healthy messages.
type attemptsTopic struct {
	f   *fakeServer
	sub model.Subscription
	ids []string
}

func newAttemptsTopic(t *testing.T, name string, n int) *attemptsTopic {
	t.Helper()
	f := newFakeServer(t)
	ctx := context.Background()
	topic := fmt.Sprintf("projects/%s/topics/%s", testProject, name)
	dead := topic + "-dead"
	for _, tp := range []string{topic, dead} {
		if _, err := f.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: tp}); err != nil {
			t.Fatalf("create topic %s: %v", tp, err)
		}
	}
	at := &attemptsTopic{f: f, sub: model.SubscriptionOf(testProject, name+"-sub")}
	if _, err := f.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: at.sub.String(), Topic: topic, AckDeadlineSeconds: 10,
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: dead, MaxDeliveryAttempts: attemptsLimit},
	}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	at.ids = f.publish(t, topic, n, nil)
	return at
}

// attemptsSpent is what pstest saw of the healthy messages.
type attemptsSpent struct {
	messages     int
	acked        int
	deadLettered int // delivered attemptsLimit times and never acked
	deliveries   int // over all messages
	most         int // the most deliveries of one message
}

func (at *attemptsTopic) spent() attemptsSpent {
	s := attemptsSpent{messages: len(at.ids)}
	for _, id := range at.ids {
		m := at.f.srv.Message(id)
		s.deliveries += m.Deliveries
		s.most = max(s.most, m.Deliveries)
		switch {
		case m.Acks > 0:
			s.acked++
		case m.Deliveries >= attemptsLimit:
			s.deadLettered++
		}
	}
	return s
}

func (s attemptsSpent) String() string {
	return fmt.Sprintf("%d messages: %d acked, %d dead-lettered without a failure of their own; %d deliveries (%.2f per message, at most %d)",
		s.messages, s.acked, s.deadLettered, s.deliveries, float64(s.deliveries)/float64(s.messages), s.most)
}

// runAttempts runs p on Prism, bounded, and returns its metrics and error.
func runAttempts(t *testing.T, p *beam.Pipeline) (beam.PipelineResult, error) {
	t.Helper()
	type outcome struct {
		res beam.PipelineResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := ptest.RunWithMetrics(p)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(4 * time.Minute):
		t.Fatal("the job did not end within 4m")
		return nil, nil
	}
}

// nackCounts names the read's give-backs by reason, for the log.
func nackCounts(res beam.PipelineResult) string {
	if res == nil {
		return "no metrics"
	}
	var parts []string
	for _, name := range []string{"messages_nacked_budget", "messages_nacked_release", "messages_nacked_shutdown", "messages_nacked_uncommitted", "messages_nacked_superseded"} {
		if v := counterValue(res, name); v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", strings.TrimPrefix(name, "messages_nacked_"), v))
		}
	}
	return "nacked: " + strings.Join(append(parts, ""), " ")
}

// A buffer budget of 10 messages under a downstream stage slower than the
// subscription's arrivals: every message is read, and delivered once.
func TestBudgetSpendsNoDeliveryAttemptsOnPrism(t *testing.T) {
	at := newAttemptsTopic(t, "attempts-budget", 200)
	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, Config{Subscriptions: []model.Subscription{at.sub}, BufferMaxMessages: 10, IdleTimeout: 5 * time.Second, Connection: at.f.conn})
	beam.ParDo(s, &slowStage{Delay: 20 * time.Millisecond}, msgs)
	res, err := runAttempts(t, p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	spent := at.spent()
	t.Logf("ATTEMPTS budget: %v; %s", spent, nackCounts(res))
	if spent.deliveries != spent.messages || spent.acked != spent.messages {
		t.Errorf("%v; want every message acked, each delivered once", spent)
	}
}

// A downstream stage that stalls for 1.5 s at every 50th message, longer
// than LeaseIdle: every message is read, and delivered once.
func TestStallsSpendNoDeliveryAttemptsOnPrism(t *testing.T) {
	at := newAttemptsTopic(t, "attempts-stall", 200)
	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, Config{Subscriptions: []model.Subscription{at.sub}, LeaseIdle: time.Second, IdleTimeout: 5 * time.Second, Connection: at.f.conn})
	beam.ParDo(s, &stallingStage{Name: t.Name(), Every: 50, Stall: 1500 * time.Millisecond}, msgs)
	res, err := runAttempts(t, p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	spent := at.spent()
	t.Logf("ATTEMPTS stall: %v; %s", spent, nackCounts(res))
	if spent.deliveries != spent.messages || spent.acked != spent.messages {
		t.Errorf("%v; want every message acked, each delivered once", spent)
	}
}
