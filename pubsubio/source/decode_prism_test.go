package source

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

const (
	prismGood   = 20
	prismPoison = 3
)

// poisonedTopic is a topic on pstest with one subscription (with a
// dead-letter policy when deadLetter is set) holding prismGood JSON
// payloads and, among them, prismPoison that are not JSON.
type poisonedTopic struct {
	f        *fakeServer
	sub      model.Subscription
	good     []string
	poison   []string
	deadSub  string // the dead-letter topic's subscription, if any
	deadName string
}

func newPoisonedTopic(t *testing.T, name string, deadLetter bool) *poisonedTopic {
	t.Helper()
	f := newFakeServer(t)
	ctx := context.Background()
	pt := &poisonedTopic{f: f, sub: model.SubscriptionOf(testProject, name+"-sub")}
	topic := fmt.Sprintf("projects/%s/topics/%s", testProject, name)
	if _, err := f.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	sub := &pubsubpb.Subscription{Name: pt.sub.String(), Topic: topic, AckDeadlineSeconds: 10}
	if deadLetter {
		pt.deadName = topic + "-dead"
		pt.deadSub = fmt.Sprintf("projects/%s/subscriptions/%s-dead-sub", testProject, name)
		if _, err := f.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: pt.deadName}); err != nil {
			t.Fatalf("create dead-letter topic: %v", err)
		}
		if _, err := f.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: pt.deadSub, Topic: pt.deadName, AckDeadlineSeconds: 10}); err != nil {
			t.Fatalf("create dead-letter subscription: %v", err)
		}
		sub.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: pt.deadName, MaxDeliveryAttempts: 5}
	}
	if _, err := f.client.SubscriptionAdminClient.CreateSubscription(ctx, sub); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	pub := f.client.Publisher(topic)
	defer pub.Stop()
	for i := range prismGood + prismPoison {
		data := fmt.Sprintf(`{"n":%d}`, i)
		poison := i%7 == 3 && len(pt.poison) < prismPoison
		if poison {
			data = fmt.Sprintf("not json %d", i)
		}
		id, err := pub.Publish(ctx, &pubsub.Message{Data: []byte(data)}).Get(ctx)
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		if poison {
			pt.poison = append(pt.poison, id)
		} else {
			pt.good = append(pt.good, id)
		}
	}
	if len(pt.poison) != prismPoison {
		t.Fatalf("published %d poison messages, want %d", len(pt.poison), prismPoison)
	}
	return pt
}

func (pt *poisonedTopic) config(policy model.DecodePolicy) Config {
	return Config{
		Subscriptions: []model.Subscription{pt.sub},
		Format:        model.FormatJSON,
		DecodePolicy:  policy,
		IdleTimeout:   3 * time.Second,
		Connection:    pt.f.conn,
	}
}

// checkAcked checks that every message in ids was acked at least once
// (want) or never (!want).
func (pt *poisonedTopic) checkAcked(t *testing.T, what string, ids []string, want bool) {
	t.Helper()
	for _, id := range ids {
		m := pt.f.srv.Message(id)
		if (m.Acks > 0) != want {
			t.Errorf("%s message %s: %d acks after %d deliveries; want acked: %v", what, id, m.Acks, m.Deliveries, want)
		}
	}
}

func counterValue(res beam.PipelineResult, name string) int64 {
	var total int64
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == metrics.Namespace && c.Name() == name {
			total += c.Result()
		}
	}
	return total
}

func TestDecodeDeadLetterOnPrism(t *testing.T) {
	pt := newPoisonedTopic(t, "dead-lettered", false)
	p, s := beam.NewPipelineWithRoot()
	msgs, dead := ReadWithDeadLetters(s, pt.config(model.DecodeDeadLetter))
	passert.Count(s, msgs, "messages", prismGood)
	passert.Count(s, dead, "dead letters", prismPoison)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	pt.checkAcked(t, "good", pt.good, true)
	pt.checkAcked(t, "poison", pt.poison, true)
	if got := counterValue(res, "decode_failures"); got != prismPoison {
		t.Errorf("decode_failures = %d, want %d", got, prismPoison)
	}
}

func TestDecodeDropOnPrism(t *testing.T) {
	pt := newPoisonedTopic(t, "dropped", false)
	p, s := beam.NewPipelineWithRoot()
	passert.Count(s, Read(s, pt.config(model.DecodeDrop)), "messages", prismGood)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	pt.checkAcked(t, "good", pt.good, true)
	pt.checkAcked(t, "poison", pt.poison, true)
	if got := counterValue(res, "decode_failures"); got != prismPoison {
		t.Errorf("decode_failures = %d, want %d", got, prismPoison)
	}
}

func TestDecodeFailOnPrism(t *testing.T) {
	pt := newPoisonedTopic(t, "failing", false)
	p, s := beam.NewPipelineWithRoot()
	Read(s, pt.config(model.DecodeFail))
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), "cannot be decoded") {
		t.Fatalf("pipeline error %v; want the bundle's decode failure", err)
	}
	named := false
	for _, id := range pt.poison {
		named = named || strings.Contains(err.Error(), id)
	}
	if !named {
		t.Errorf("error %q names none of the poison messages %v", err, pt.poison)
	}
	pt.checkAcked(t, "poison", pt.poison, false)
}

// Under Nack, pstest forwards each poison message to the dead-letter topic
// after five deliveries, each nacked at once by the read.
func TestDecodeNackOnPrism(t *testing.T) {
	pt := newPoisonedTopic(t, "nacked", true)
	p, s := beam.NewPipelineWithRoot()
	passert.Count(s, Read(s, pt.config(model.DecodeNack)), "messages", prismGood)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	pt.checkAcked(t, "good", pt.good, true)
	pt.checkAcked(t, "poison", pt.poison, false)

	failures, nacks := counterValue(res, "decode_failures"), counterValue(res, "messages_nacked_decode")
	if failures < prismPoison || nacks != failures {
		t.Errorf("decode_failures = %d, messages_nacked_decode = %d; want equal and at least %d", failures, nacks, prismPoison)
	}

	// Every poison payload reaches the dead-letter topic.
	want := map[string]bool{}
	for _, id := range pt.poison {
		want[string(pt.f.srv.Message(id).Data)] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	got := map[string]bool{}
	err = pt.f.client.Subscriber(pt.deadSub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		got[string(m.Data)] = true
		if len(got) == len(want) {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("receiving dead letters: %v", err)
	}
	for data := range want {
		if !got[data] {
			t.Errorf("poison payload %q never reached the dead-letter topic (got %v)", data, got)
		}
	}
}
