package prepare

import (
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// DecodePolicy NACK rejects a subscription without a dead-letter policy,
// and the create options that would make one.
func TestNackPolicyNeedsADeadLetterPolicy(t *testing.T) {
	nack := Requirements{DecodePolicy: model.DecodeNack}
	name := "projects/p/subscriptions/s"
	errs := rejection(nack, Owned{}, name, &pubsubpb.Subscription{Name: name})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), name) || !strings.Contains(errs[0].Error(), "redelivered forever") {
		t.Errorf("rejection without a dead-letter policy = %v; want one naming %s and saying why", errs, name)
	}
	withPolicy := &pubsubpb.Subscription{Name: name, DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: "projects/p/topics/dead", MaxDeliveryAttempts: 5}}
	if errs := rejection(nack, Owned{}, name, withPolicy); len(errs) != 0 {
		t.Errorf("rejection with a dead-letter policy = %v", errs)
	}
	if errs := rejection(Requirements{DecodePolicy: model.DecodeFail}, Owned{}, name, &pubsubpb.Subscription{Name: name}); len(errs) != 0 {
		t.Errorf("rejection under DecodeFail = %v", errs)
	}

	topic := model.TopicOf("pubsubio-test", "events")
	if errs := createRejection(nack, "Setup[0].Create", setupSub, SubscriptionCreateOptions{Topic: topic}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "DeadLetterTopic") {
		t.Errorf("createRejection without DeadLetterTopic = %v; want one saying to set it", errs)
	}
	if errs := createRejection(nack, "Setup[0].Create", setupSub, SubscriptionCreateOptions{Topic: topic, DeadLetterTopic: model.TopicOf("pubsubio-test", "dead")}); len(errs) != 0 {
		t.Errorf("createRejection with DeadLetterTopic = %v", errs)
	}
}
