package source

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Within one pipeline, a read's topic subscription is refused when another
// read also consumes it, as its own topic subscription or as a listed one,
// in either order; reads of other subscriptions, the same read in another
// pipeline, and two reads of one listed subscription are not.
func TestSharedTopicSubscriptionRefused(t *testing.T) {
	nightly := model.SubscriptionOf(ordersTopic.Project, "nightly-"+ordersTopic.ID)
	topicRead := Config{Topics: []model.Topic{ordersTopic}, TopicSubscriptions: TopicSubscriptionOptions{Name: "nightly"}, MaxMessages: 10}
	listed := Config{Subscriptions: []model.Subscription{nightly}}
	build := func(s beam.Scope, cfg Config) error {
		_, err := TryRead(s, cfg)
		return err
	}
	refused := func(err error, wants ...string) {
		t.Helper()
		if !errors.Is(err, construct.ErrInvalidConfig) {
			t.Fatalf("got %v, want a refusal wrapping ErrInvalidConfig", err)
		}
		for _, w := range append(wants, nightly.String(), "by another read of this pipeline") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error does not contain %q:\n%v", w, err)
			}
		}
	}

	p, s := beam.NewPipelineWithRoot()
	if err := build(s, topicRead); err != nil {
		t.Fatalf("the first read: %v", err)
	}
	refused(build(s.Scope("again"), topicRead), "Topics[0]: its subscription", `TopicSubscriptions.Name "nightly"`, "is also created for its topic")
	refused(build(s, listed), "Subscriptions: ", "is also created for its topic")
	other := topicRead
	other.Topics = []model.Topic{returnsTopic}
	if err := build(s, other); err != nil {
		t.Errorf("a read of another topic with the same name: %v", err)
	}

	_, s2 := beam.NewPipelineWithRoot()
	for i, cfg := range []Config{listed, listed} {
		if err := build(s2, cfg); err != nil {
			t.Errorf("read %d of the listed %s in a pipeline of its own: %v", i+1, nightly, err)
		}
	}
	refused(build(s2, topicRead), "Topics[0]", "is also read by")

	_, s3 := beam.NewPipelineWithRoot()
	if err := build(s3, topicRead); err != nil {
		t.Errorf("the same topic read in another pipeline: %v", err)
	}
	runtime.KeepAlive(p)
}
