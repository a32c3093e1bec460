package source

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

var (
	ordersTopic  = model.TopicOf("pubsubio-test", "orders")
	returnsTopic = model.TopicOf("other-project", "returns")
)

// Each topic becomes a subscription of the read's own, in the topic's
// project, named after TopicSubscriptions.Name and created with a one-day
// TTL, a retention within it and the labels that say who made it; the
// user's options and labels are kept. Defaulting again changes nothing.
func TestTopicsBecomeSubscriptionsOfTheRead(t *testing.T) {
	p := testPlan(t, func(c *Config) {
		c.Topics = []model.Topic{ordersTopic, returnsTopic}
		c.TopicSubscriptions = TopicSubscriptionOptions{Name: "nightly", Create: SubscriptionCreateOptions{
			AckDeadline: time.Minute,
			Labels:      map[string]string{"team": "billing"},
		}}
	})
	cfg := p.Cfg
	wantOwned := []model.Subscription{
		model.SubscriptionOf("pubsubio-test", "nightly-orders"),
		model.SubscriptionOf("other-project", "nightly-returns"),
	}
	if diff := cmp.Diff(wantOwned, p.Owned.Subscriptions); diff != "" {
		t.Errorf("owned subscriptions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(testSubs(1), wantOwned...), cfg.Subscriptions); diff != "" {
		t.Errorf("Subscriptions (-want +got):\n%s", diff)
	}
	if len(cfg.Topics) != 0 || !cmp.Equal(cfg.TopicSubscriptions, TopicSubscriptionOptions{}) {
		t.Errorf("Topics = %v, TopicSubscriptions = %+v after defaulting, want them moved into Subscriptions and the plan", cfg.Topics, cfg.TopicSubscriptions)
	}
	if len(p.Owned.Label) != 10 {
		t.Errorf("the read's label %q, want 10 random characters", p.Owned.Label)
	}
	wantLabels := map[string]string{LabelCreatedBy: LabelCreatedByValue, LabelName: "nightly", LabelRead: p.Owned.Label, "team": "billing"}
	for i, topic := range []model.Topic{ordersTopic, returnsTopic} {
		setup := prepare.SetupFor(cfg.Setup, wantOwned[i])
		c := setup.Create
		if c.Topic != topic || c.AckDeadline != time.Minute || c.ExpirationTTL != 24*time.Hour || c.MessageRetention != 24*time.Hour {
			t.Errorf("%s: create options %+v; want topic %s, the user's ack deadline, a 1-day TTL and retention", wantOwned[i], c, topic)
		}
		if diff := cmp.Diff(wantLabels, c.Labels); diff != "" {
			t.Errorf("%s: labels (-want +got):\n%s", wantOwned[i], diff)
		}
		if setup.Start.Kind != PositionResume {
			t.Errorf("%s: start position %v, want %v", wantOwned[i], setup.Start.Kind, PositionResume)
		}
	}
	again, _, err := cfg.withDefaults()
	if err != nil || !cmp.Equal(again.Subscriptions, cfg.Subscriptions) || len(again.Setup) != len(cfg.Setup) {
		t.Errorf("defaulting twice: %v, %v subscriptions and %d setup entries; want the same %d and %d", err, again.Subscriptions, len(again.Setup), len(cfg.Subscriptions), len(cfg.Setup))
	}
}

// Without a name, each construction generates one, which then travels in
// the configuration: two constructions never share subscriptions. With
// one, they share the subscriptions' names but not the label that marks
// what each created.
func TestTopicSubscriptionNameGeneratedPerConstruction(t *testing.T) {
	build := func(name string) readPlan {
		return testPlan(t, func(c *Config) {
			c.Subscriptions, c.Topics, c.TopicSubscriptions.Name = nil, []model.Topic{ordersTopic}, name
		})
	}
	a, b := build(""), build("")
	if a.Owned.Subscriptions[0] == b.Owned.Subscriptions[0] {
		t.Errorf("two constructions both read %s; want a subscription each", a.Owned.Subscriptions[0])
	}
	for _, p := range []readPlan{a, b} {
		name, sub := p.Owned.Name, p.Owned.Subscriptions[0]
		if !IsGeneratedName(name) || sub.ID != name+"-orders" {
			t.Errorf("generated name %q, subscription %s; want %s and 10 characters, then -orders", name, sub, `"pubsubio-"`)
		}
		if got := prepare.SetupFor(p.Cfg.Setup, sub).Create.Labels; got[LabelName] != name || got[LabelRead] != p.Owned.Label {
			t.Errorf("labels %v, want %s the generated name %q and %s the read's %q", got, LabelName, name, LabelRead, p.Owned.Label)
		}
	}
	for _, name := range []string{"nightly", "pubsubio-", "pubsubio-abcdefghi", "pubsubio-abcdefghij1", "pubsubio-ABCDEFGHIJ", "pubsubio-abcdefghi1"} {
		if IsGeneratedName(name) {
			t.Errorf("IsGeneratedName(%q), want false", name)
		}
	}
	c, d := build("nightly"), build("nightly")
	if c.Owned.Subscriptions[0] != d.Owned.Subscriptions[0] || c.Owned.Label == d.Owned.Label {
		t.Errorf("two constructions named nightly: %v and %v; want the same subscription, each with a label of its own", c.Owned, d.Owned)
	}
}

// The label keys the read sets itself are refused in the user's labels,
// each named: a user's pubsubio-read would let a bounded read delete what
// another created.
func TestTopicSubscriptionReservedLabelsRefused(t *testing.T) {
	cfg := validConfig()
	cfg.Topics = []model.Topic{ordersTopic}
	cfg.TopicSubscriptions.Create.Labels = map[string]string{LabelRead: "abc", LabelCreatedBy: "me", "team": "billing"}
	_, _, err := cfg.withDefaults()
	if !errors.Is(err, construct.ErrInvalidConfig) {
		t.Fatalf("withDefaults: %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{`TopicSubscriptions.Create.Labels["pubsubio-read"] = "abc": the key is reserved`, `Labels["created-by"] = "me"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "team") {
		t.Errorf("the error names the label team, which is the user's to set:\n%v", err)
	}
}

// A read of invalid topics alone is refused for its topics, not as a
// read of nothing.
func TestInvalidTopicsAloneNamed(t *testing.T) {
	cfg := Config{Topics: []model.Topic{model.TopicOf("pubsubio-test", "orders")}, TopicSubscriptions: TopicSubscriptionOptions{Name: "UPPER case"}}
	_, _, err := cfg.withDefaults()
	if err == nil || !strings.Contains(err.Error(), `TopicSubscriptions.Name "UPPER case"`) || strings.Contains(err.Error(), "both empty") {
		t.Errorf("withDefaults = %v; want the name refused, and no word of an empty read", err)
	}
}

// An option wrong for every topic is said once, not once per topic.
func TestTopicErrorSaidOnce(t *testing.T) {
	cfg := validConfig()
	cfg.Topics = []model.Topic{ordersTopic, returnsTopic}
	cfg.TopicSubscriptions.Create.ExpirationTTL = time.Hour
	_, _, err := cfg.withDefaults()
	if n := strings.Count(fmt.Sprint(err), "ExpirationTTL 1h0m0s must be from 24h0m0s"); n != 1 {
		t.Errorf("the TTL error is said %d times, want once:\n%v", n, err)
	}
}

// Only a read of a generated TopicSubscriptions.Name deletes the
// subscriptions it created, bounded or not: an unbounded one once a drain
// ends it. A read given a Name never does.
func TestOnlyGeneratedNamesAreDeleted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		deletes bool
	}{
		{"unbounded, generated", Config{Topics: []model.Topic{ordersTopic}}, true},
		{"bounded, generated", Config{Topics: []model.Topic{ordersTopic}, MaxMessages: 10}, true},
		{"bounded, named", Config{Topics: []model.Topic{ordersTopic}, TopicSubscriptions: TopicSubscriptionOptions{Name: "nightly"}, IdleTimeout: time.Minute}, false},
		{"unbounded, named", Config{Topics: []model.Topic{ordersTopic}, TopicSubscriptions: TopicSubscriptionOptions{Name: "nightly"}}, false},
		{"subscriptions only", Config{Subscriptions: testSubs(1), MaxMessages: 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			if _, err := TryRead(s, tc.cfg); err != nil {
				t.Fatal(err)
			}
			edges, _, err := p.Build()
			if err != nil {
				t.Fatal(err)
			}
			deletes := false
			for _, e := range edges {
				deletes = deletes || strings.Contains(e.Scope().String(), "DeleteTopicSubscriptions") && strings.Contains(e.Name(), "deleteOwnedFn")
			}
			if deletes != tc.deletes {
				t.Errorf("the read deletes its subscriptions: %v, want %v", deletes, tc.deletes)
			}
		})
	}
}
