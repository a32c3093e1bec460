package prepare

import (
	"fmt"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// A subscription of the read's own that exists on another topic, or on
// none (its topic deleted), is refused at prepare, naming both topics,
// before anything is created; so is one made concurrently on another
// topic. One on the read's topic is read, whoever made it.
func TestOwnSubscriptionOnAnotherTopicRejected(t *testing.T) {
	returnsTopic := model.TopicOf("other-project", "returns")
	cfg := topicJob(t, TopicSubscriptionOptions{Name: "nightly"}, setupTopic, returnsTopic)
	own, other := cfg.Owned.Subscriptions[0], cfg.Owned.Subscriptions[1]
	onTopic := func(topic string) func(*pubsubpb.Subscription) {
		return func(s *pubsubpb.Subscription) { s.Topic = topic }
	}
	for _, wrong := range []string{returnsTopic.String(), "_deleted-topic_"} {
		adm := newFakeAdmin(existingSub(own, onTopic(wrong)))
		counts, err := runPrepare(t, adm, cfg)
		wantErrorContaining(t, err, own.String(), fmt.Sprintf("it is on topic %q", wrong), "for topic "+setupTopic.String(), `TopicSubscriptions.Name "nightly"`, "nothing was created")
		if adm.count("create") != 0 || counts.rejected != 1 {
			t.Errorf("on %s: %d creates and %d rejections; want none and 1", wrong, adm.count("create"), counts.rejected)
		}
	}

	adm := newFakeAdmin()
	adm.racing[own.String()] = existingSub(own, onTopic(returnsTopic.String()))
	_, err := runPrepare(t, adm, cfg)
	wantErrorContaining(t, err, "created by someone else", own.String(), fmt.Sprintf("it is on topic %q", returnsTopic.String()))

	adm = newFakeAdmin(existingSub(own, nil)) // on setupTopic, without the read's label
	if _, err := runPrepare(t, adm, cfg); err != nil {
		t.Fatalf("prepare with %s on its topic: %v", own, err)
	}
	if want := []string{"get " + own.String(), "get " + other.String(), "create " + other.String()}; !cmp.Equal(adm.calls(), want) {
		t.Errorf("calls %q, want %q: the existing one read as it is, the missing one created", adm.calls(), want)
	}
}
