//go:build realpubsub

package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Dead-letter forwarding under DecodeNack on the real service: the read
// nacks each poison delivery, and the subscription's dead-letter policy,
// executed by Pub/Sub's own service account, forwards the message once its
// delivery attempts reach the maximum.

func init() {
	register.Function1x1(idAndAttempt)
}

// idAndAttempt records an emitted message as "<ID>#<delivery attempt>".
func idAndAttempt(m pubsubio.Message) string { return fmt.Sprintf("%s#%d", m.ID, m.DeliveryAttempt) }

// deadLetterSourceDeliveryCount is the attribute Pub/Sub adds to a message
// it forwards to a dead-letter topic: the delivery attempts it counted.
const deadLetterSourceDeliveryCount = "CloudPubSubDeadLetterSourceDeliveryCount"

// grantServiceAgent gives the project's Pub/Sub service account the roles
// dead-letter forwarding needs on this run's resources: publishing to the
// dead-letter topic and acking on the source subscription. Both resources
// were just created, so their own policies hold nothing else to keep.
func (r *realPubSub) grantServiceAgent(t *testing.T, deadTopic pubsubio.Topic, sub pubsubio.Subscription) {
	t.Helper()
	number := requireEnv(t, envProjectNumber, "the project's number, naming Pub/Sub's service account for dead-letter forwarding")
	agent := fmt.Sprintf("serviceAccount:service-%s@gcp-sa-pubsub.iam.gserviceaccount.com", number)
	policy := func(role string) *iampb.Policy {
		return &iampb.Policy{Bindings: []*iampb.Binding{{Role: role, Members: []string{agent}}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.client.TopicAdminClient.SetIamPolicy(ctx, &iampb.SetIamPolicyRequest{Resource: deadTopic.String(), Policy: policy("roles/pubsub.publisher")}); err != nil {
		t.Fatalf("granting %s roles/pubsub.publisher on %s (the test's identity needs roles/pubsub.admin): %v", agent, deadTopic, err)
	}
	if _, err := r.client.SubscriptionAdminClient.SetIamPolicy(ctx, &iampb.SetIamPolicyRequest{Resource: sub.String(), Policy: policy("roles/pubsub.subscriber")}); err != nil {
		t.Fatalf("granting %s roles/pubsub.subscriber on %s (the test's identity needs roles/pubsub.admin): %v", agent, sub, err)
	}
}

// Poison payloads among JSON messages, read under DecodeNack from a
// subscription whose dead-letter policy allows 5 delivery attempts: every
// good message is emitted, with the delivery attempt Pub/Sub reports; no
// poison message is emitted or put on the read's dead-letter output; every
// poison message arrives on the dead-letter topic carrying Pub/Sub's
// delivery count.
func TestRealPubSubNackForwardsPoisonToDeadLetterTopic(t *testing.T) {
	t.Parallel()
	r := newRealPubSub(t)
	topic := r.topic(t, "nack")
	deadTopic := r.topic(t, "nack-dead")
	deadSub := r.createSubscription(t, "nack-dead", deadTopic, &pubsubpb.Subscription{})
	sub := r.createSubscription(t, "nack", topic, &pubsubpb.Subscription{
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: deadTopic.String(), MaxDeliveryAttempts: decodeAttempts},
	})
	r.grantServiceAgent(t, deadTopic, sub)

	const good, poison = 40, 4
	var msgs []*pubsub.Message
	for i := range good + poison {
		data := fmt.Sprintf(`{"n":%d}`, i)
		if i%((good+poison)/poison) == 1 {
			data = fmt.Sprintf(`{"n":%d`, i) // truncated JSON
		}
		msgs = append(msgs, &pubsub.Message{Data: []byte(data)})
	}
	ids := r.publish(t, topic, false, msgs)
	goodIDs, poisonIDs := map[string]bool{}, map[string]string{} // poison: payload -> ID
	for i, m := range msgs {
		if strings.HasSuffix(string(m.Data), "}") {
			goodIDs[ids[i]] = true
		} else {
			poisonIDs[string(m.Data)] = ids[i]
		}
	}

	p, s := beam.NewPipelineWithRoot()
	out, dead := pubsubio.ReadWithDeadLetters(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{sub},
		Format:        pubsubio.FormatJSON,
		DecodePolicy:  pubsubio.DecodeNack,
		// Bounded by idleness: the read ends once the poison messages stop
		// coming back, i.e. once Pub/Sub forwarded them.
		IdleTimeout: 30 * time.Second,
		Connection:  r.conn,
	})
	emitted, deadOut := collect.Bucket(t), collect.Bucket(t)
	collect.Into(s, emitted, beam.ParDo(s, idAndAttempt, out))
	collect.Into(s, deadOut, beam.ParDo(s, deadLetterKey, dead))
	// IAM grants take effect within minutes; until then Pub/Sub cannot
	// forward and keeps redelivering, and the read keeps nacking.
	res := runWithin(t, p, 8*time.Minute, func() string {
		return fmt.Sprintf("%d messages emitted; if the read never went idle, poison messages kept coming back: Pub/Sub did not forward them, so check that its service account holds the roles granted above", collect.Len(emitted))
	})

	items, err := collect.ItemsOf[string](emitted)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, it := range items {
		id, attempt, _ := strings.Cut(it, "#")
		if !goodIDs[id] {
			t.Errorf("emitted %s, which is not one of the good messages", id)
		}
		if n, _ := strconv.Atoi(attempt); n < 1 {
			t.Errorf("message %s emitted with delivery attempt %q; Pub/Sub reports it on a subscription with a dead-letter policy", id, attempt)
		}
		seen[id] = true
	}
	for id := range goodIDs {
		if !seen[id] {
			t.Errorf("good message %s never emitted", id)
		}
	}
	if n := collect.Len(deadOut); n != 0 {
		t.Errorf("%d dead letters on the read's output under Nack, want none: %s", n, collect.Sample(deadOut, 5))
	}
	nacked := counter(res, "messages_nacked_decode")
	if failures := counter(res, "decode_failures"); nacked < int64(poison) || nacked != failures {
		t.Errorf("messages_nacked_decode %d, decode_failures %d; want equal and at least %d", nacked, failures, poison)
	}

	got := receiveAll(t, r.client, deadSub, poison, 2*time.Minute)
	for data, id := range poisonIDs {
		m := got[data]
		if m == nil {
			t.Errorf("poison message %s (%q) is not on the dead-letter topic", id, data)
			continue
		}
		count, err := strconv.Atoi(m.Attributes[deadLetterSourceDeliveryCount])
		if err != nil || count < 1 {
			t.Errorf("dead letter of %s: %s = %q, want Pub/Sub's delivery count", id, deadLetterSourceDeliveryCount, m.Attributes[deadLetterSourceDeliveryCount])
		}
		t.Logf("poison message %s forwarded after %d delivery attempts (policy: %d)", id, count, decodeAttempts)
	}
	t.Logf("%d poison deliveries nacked by the read for %d poison messages", nacked, poison)
}
