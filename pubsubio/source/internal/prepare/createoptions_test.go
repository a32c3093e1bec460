package prepare

import (
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Each create option lands in its own field of the subscription the prepare
// step creates, and nothing else is set, so Pub/Sub's defaults apply to
// every option left unset.
func TestCreateOptionsTranslateFieldByField(t *testing.T) {
	base := func() *pubsubpb.Subscription {
		return &pubsubpb.Subscription{Name: setupSub.String(), Topic: setupTopic.String()}
	}
	cases := []struct {
		name string
		edit func(*SubscriptionCreateOptions)
		want func(*pubsubpb.Subscription)
	}{
		{"topic only: Pub/Sub's defaults", func(*SubscriptionCreateOptions) {}, func(*pubsubpb.Subscription) {}},
		{"AckDeadline", func(o *SubscriptionCreateOptions) { o.AckDeadline = 42 * time.Second },
			func(s *pubsubpb.Subscription) { s.AckDeadlineSeconds = 42 }},
		{"EnableMessageOrdering", func(o *SubscriptionCreateOptions) { o.EnableMessageOrdering = true },
			func(s *pubsubpb.Subscription) { s.EnableMessageOrdering = true }},
		{"MessageRetention", func(o *SubscriptionCreateOptions) { o.MessageRetention = 90 * time.Minute },
			func(s *pubsubpb.Subscription) { s.MessageRetentionDuration = durationpb.New(90 * time.Minute) }},
		{"RetainAckedMessages", func(o *SubscriptionCreateOptions) { o.RetainAckedMessages = true },
			func(s *pubsubpb.Subscription) { s.RetainAckedMessages = true }},
		{"ExpirationTTL", func(o *SubscriptionCreateOptions) { o.ExpirationTTL = 9 * 24 * time.Hour },
			func(s *pubsubpb.Subscription) {
				s.ExpirationPolicy = &pubsubpb.ExpirationPolicy{Ttl: durationpb.New(9 * 24 * time.Hour)}
			}},
		{"NeverExpire: a policy without a TTL", func(o *SubscriptionCreateOptions) { o.NeverExpire = true },
			func(s *pubsubpb.Subscription) { s.ExpirationPolicy = &pubsubpb.ExpirationPolicy{} }},
		{"DeadLetterTopic with Pub/Sub's attempts", func(o *SubscriptionCreateOptions) { o.DeadLetterTopic = deadTopic },
			func(s *pubsubpb.Subscription) {
				s.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: deadTopic.String()}
			}},
		{"DeadLetterTopic and MaxDeliveryAttempts", func(o *SubscriptionCreateOptions) {
			o.DeadLetterTopic = deadTopic
			o.MaxDeliveryAttempts = 12
		}, func(s *pubsubpb.Subscription) {
			s.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: deadTopic.String(), MaxDeliveryAttempts: 12}
		}},
		{"Filter", func(o *SubscriptionCreateOptions) { o.Filter = `attributes.kind = "order"` },
			func(s *pubsubpb.Subscription) { s.Filter = `attributes.kind = "order"` }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := SubscriptionCreateOptions{Topic: setupTopic}
			c.edit(&o)
			want := base()
			c.want(want)
			got := o.subscriptionProto(setupSub)
			if !proto.Equal(got, want) {
				t.Errorf("subscriptionProto:\n got %v\nwant %v", got, want)
			}
			if got.GetEnableExactlyOnceDelivery() {
				t.Error("the created subscription asks for exactly-once delivery, which the read rejects")
			}
		})
	}
}
