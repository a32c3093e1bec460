package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
)

// Decode-policy tests: a subscription holding JSON payloads and, among
// them, poison messages (a payload that is not JSON, a malformed timestamp
// attribute), read on Prism against the emulator under each policy.

func init() {
	register.Function1x1(messageID)
}

// messageID keys what a read emitted by message ID alone.
func messageID(m pubsubio.Message) string { return m.ID }

const (
	decodeGood     = 40
	decodeTSAttr   = "event_ts"
	decodeAttempts = 5 // Pub/Sub's minimum max delivery attempts
)

// poisoned is a topic with one subscription and what was published to it.
type poisoned struct {
	e      *emulator.Emulator
	topic  pubsubio.Topic
	sub    pubsubio.Subscription
	good   []string
	poison []string // IDs: a non-JSON payload, then a malformed timestamp
}

// newPoisoned publishes to a new topic on e (the emulator when nil).
func newPoisoned(t *testing.T, e *emulator.Emulator, prefix string) *poisoned {
	t.Helper()
	if e == nil {
		e = emulator.Require(t)
	}
	topic := e.CreateTopic(t, prefix)
	p := &poisoned{e: e, topic: topic, sub: e.CreateSubscription(t, topic, prefix, 10*time.Second)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := e.Client(t).Publisher(topic.String())
	defer pub.Stop()
	var results []*pubsub.PublishResult
	kinds := []string{}
	for i := range decodeGood + 2 {
		m := &pubsub.Message{Data: fmt.Appendf(nil, `{"n":%d}`, i), Attributes: map[string]string{decodeTSAttr: "1700000000000"}}
		kind := "good"
		switch i {
		case decodeGood / 3:
			m.Data, kind = []byte(`{"n":`), "poison"
		case 2 * decodeGood / 3:
			m.Attributes[decodeTSAttr], kind = "last tuesday", "poison"
		}
		results = append(results, pub.Publish(ctx, m))
		kinds = append(kinds, kind)
	}
	for i, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if kinds[i] == "poison" {
			p.poison = append(p.poison, id)
		} else {
			p.good = append(p.good, id)
		}
	}
	return p
}

func (p *poisoned) config(policy pubsubio.DecodePolicy) pubsubio.ReadConfig {
	return pubsubio.ReadConfig{
		Subscriptions:      []pubsubio.Subscription{p.sub},
		Format:             pubsubio.FormatJSON,
		DecodePolicy:       policy,
		TimestampAttribute: decodeTSAttr,
		MaxMessages:        int64(decodeGood + 2), // dropped and dead-lettered messages count

		IdleTimeout: 10 * time.Second,
		Connection:  pubsubio.Connection{EmulatorEndpoint: p.e.Endpoint},
	}
}

// checkAll checks that bucket holds every one of ids, at least once.
func checkAll(t *testing.T, what, bucket string, ids []string) {
	t.Helper()
	got := tally(t, bucket)
	for _, id := range ids {
		if got[id] == 0 {
			t.Errorf("%s: %s missing (got %d distinct)", what, id, len(got))
		}
	}
}

// runRead reads p under cfg into two buckets, messages and dead letters.
func (p *poisoned) runRead(t *testing.T, cfg pubsubio.ReadConfig) (msgs, dead string, res beam.PipelineResult) {
	t.Helper()
	pl, s := beam.NewPipelineWithRoot()
	out, dl := pubsubio.ReadWithDeadLetters(s, cfg)
	msgs, dead = collect.Bucket(t), collect.Bucket(t)
	collect.Into(s, msgs, beam.ParDo(s, messageID, out))
	collect.Into(s, dead, beam.ParDo(s, deadLetterKey, dl))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := beamx.RunWithMetrics(ctx, pl)
	if ctx.Err() != nil {
		t.Fatalf("the read did not finish within 3 minutes: %v", err)
	}
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	return msgs, dead, res
}

func TestDecodeDeadLetterEndsOnTheDeadLetterOutput(t *testing.T) {
	t.Parallel()
	p := newPoisoned(t, nil, "decode-dead")
	msgs, dead, res := p.runRead(t, p.config(pubsubio.DecodeDeadLetter))
	checkAll(t, "messages", msgs, p.good)
	var want []string
	for _, id := range p.poison {
		want = append(want, fmt.Sprintf("%s/%s/%s", id, dlq.StageDecode, p.sub.ID))
	}
	checkAll(t, "dead letters", dead, want)
	if n := len(tally(t, dead)); n != len(p.poison) {
		t.Errorf("%d distinct dead letters, want %d", n, len(p.poison))
	}
	if got := counter(res, "decode_failures"); got < int64(len(p.poison)) {
		t.Errorf("decode_failures = %d, want at least %d (one per delivery of a poison message)", got, len(p.poison))
	}
}

func TestDecodeDropEmitsOnlyGoodMessages(t *testing.T) {
	t.Parallel()
	p := newPoisoned(t, nil, "decode-drop")
	msgs, dead, res := p.runRead(t, p.config(pubsubio.DecodeDrop))
	checkAll(t, "messages", msgs, p.good)
	got := tally(t, msgs)
	for _, id := range p.poison {
		if got[id] > 0 {
			t.Errorf("poison message %s was emitted", id)
		}
	}
	if n := len(collect.Items(dead)); n != 0 {
		t.Errorf("%d dead letters under Drop, want none", n)
	}
	if got := counter(res, "decode_failures"); got < int64(len(p.poison)) {
		t.Errorf("decode_failures = %d, want at least %d", got, len(p.poison))
	}
}

// Under Fail the job fails naming a poison message and acks no poison
// message: Pub/Sub still has every one. On the pstest-backed fake, for its
// per-message ack counts.
func TestDecodeFailFailsTheJobAndAcksNoPoison(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	p := newPoisoned(t, e, "decode-fail")
	pl, s := beam.NewPipelineWithRoot()
	pubsubio.Read(s, p.config(pubsubio.DecodeFail))
	err := runFails(t, pl)
	named := false
	for _, id := range p.poison {
		named = named || strings.Contains(err.Error(), "message "+id)
	}
	if !named || !strings.Contains(err.Error(), "cannot be decoded") {
		t.Fatalf("error %q does not name a poison message %v and say it cannot be decoded", err, p.poison)
	}
	for _, id := range p.poison {
		if m := srv.Message(id); m.Acks != 0 {
			t.Errorf("poison message %s acked %d times under Fail; want it left to Pub/Sub", id, m.Acks)
		}
	}
}

// Under Nack the read nacks each poison delivery at once and the
// emulator's own dead-letter policy forwards it after decodeAttempts
// deliveries: the emulator implements dead-letter forwarding (measured: 2
// poison messages, 10 nacked deliveries, both forwarded). pubsubio/source's
// TestDecodeNackOnPrism covers the same on pstest, with per-message ack
// counts.
func TestDecodeNackLeavesPoisonToTheSubscriptionsDeadLetterPolicy(t *testing.T) {
	t.Parallel()
	p := newPoisoned(t, nil, "decode-nack")
	deadTopic := p.e.CreateTopic(t, "decode-nack-dead")
	deadSub := p.e.CreateSubscription(t, deadTopic, "decode-nack-dead", 10*time.Second)
	client := p.e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.SubscriptionAdminClient.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{
		Subscription: &pubsubpb.Subscription{
			Name:             p.sub.String(),
			DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: deadTopic.String(), MaxDeliveryAttempts: decodeAttempts},
		},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"dead_letter_policy"}},
	}); err != nil {
		t.Fatalf("adding a dead-letter policy to %s: %v", p.sub, err)
	}

	// Not bounded by count: the read goes on until the poison messages
	// stopped coming back, i.e. were forwarded.
	cfg := p.config(pubsubio.DecodeNack)
	cfg.MaxMessages = 0
	msgs, dead, res := p.runRead(t, cfg)
	checkAll(t, "messages", msgs, p.good)
	if n := len(collect.Items(dead)); n != 0 {
		t.Errorf("%d dead letters on the read's output under Nack, want none", n)
	}
	failures, nacks := counter(res, "decode_failures"), counter(res, "messages_nacked_decode")
	if failures < int64(len(p.poison)) || nacks != failures {
		t.Errorf("decode_failures = %d, messages_nacked_decode = %d; want equal and at least %d", failures, nacks, len(p.poison))
	}
	t.Logf("%d poison deliveries nacked", nacks)

	// The poison payloads on the dead-letter topic.
	got := receiveAll(t, client, deadSub, len(p.poison), time.Minute)
	if _, ok := got[`{"n":`]; !ok {
		t.Errorf("the non-JSON payload did not reach the dead-letter topic; got %d payloads", len(got))
	}
}

// Under Nack, a subscription without a dead-letter policy fails the job in
// the prepare step, naming the subscription and why.
func TestDecodeNackPrepareRejectsSubscriptionWithoutDeadLetterPolicy(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	topic := e.CreateTopic(t, "prep-nack")
	sub := e.CreateSubscription(t, topic, "prep-nack", 0)
	p, _ := readInto(t, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{sub},
		DecodePolicy:  pubsubio.DecodeNack,
		IdleTimeout:   time.Minute,
		Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, nil)
	err := runFails(t, p)
	wantInError(t, err, sub.String(), "no dead-letter policy", "redelivered forever")
}
