package source

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// deleteSubscription makes fakeAdmin delete: NOT_FOUND when missing.
func (f *fakeAdmin) deleteSubscription(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "delete "+name)
	if err := f.errs["delete "+name]; err != nil {
		return err
	}
	if _, ok := f.subs[name]; !ok {
		return status.Error(codes.NotFound, "Resource not found (resource="+name+").")
	}
	delete(f.subs, name)
	return nil
}

// updateLabels makes fakeAdmin replace a subscription's labels.
func (f *fakeAdmin) updateLabels(_ context.Context, name string, labels map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "update "+name)
	if err := f.errs["update "+name]; err != nil {
		return err
	}
	s, ok := f.subs[name]
	if !ok {
		return status.Error(codes.NotFound, "Resource not found (resource="+name+").")
	}
	s.Labels = maps.Clone(labels)
	return nil
}

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
	if len(cfg.Topics) != 0 || !cfg.TopicSubscriptions.isZero() {
		t.Errorf("Topics = %v, TopicSubscriptions = %+v after defaulting, want them moved into Subscriptions and the plan", cfg.Topics, cfg.TopicSubscriptions)
	}
	if len(p.Owned.Label) != 10 {
		t.Errorf("the read's label %q, want 10 random characters", p.Owned.Label)
	}
	wantLabels := map[string]string{LabelCreatedBy: LabelCreatedByValue, LabelName: "nightly", LabelRead: p.Owned.Label, "team": "billing"}
	for i, topic := range []model.Topic{ordersTopic, returnsTopic} {
		setup := cfg.setupFor(wantOwned[i])
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
			t.Errorf("generated name %q, subscription %s; want %s and 10 characters, then -orders", name, sub, generatedNamePrefix)
		}
		if got := p.Cfg.setupFor(sub).Create.Labels; got[LabelName] != name || got[LabelRead] != p.Owned.Label {
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

// A subscription of the read's own that exists on another topic, or on
// none (its topic deleted), is refused at prepare, naming both topics,
// before anything is created; so is one made concurrently on another
// topic. One on the read's topic is read, whoever made it.
func TestOwnSubscriptionOnAnotherTopicRejected(t *testing.T) {
	cfg := testPlan(t, func(c *Config) {
		c.Subscriptions, c.Topics, c.TopicSubscriptions.Name = nil, []model.Topic{ordersTopic, returnsTopic}, "nightly"
	})
	own, other := cfg.Owned.Subscriptions[0], cfg.Owned.Subscriptions[1]
	onTopic := func(topic string) func(*pubsubpb.Subscription) {
		return func(s *pubsubpb.Subscription) { s.Topic = topic }
	}
	for _, wrong := range []string{returnsTopic.String(), "_deleted-topic_"} {
		adm := newFakeAdmin(existingSub(own, onTopic(wrong)))
		counts, err := runPrepare(t, adm, cfg)
		wantErrorContaining(t, err, own.String(), fmt.Sprintf("it is on topic %q", wrong), "for topic "+ordersTopic.String(), `TopicSubscriptions.Name "nightly"`, "nothing was created")
		if adm.count("create") != 0 || counts.rejected != 1 {
			t.Errorf("on %s: %d creates and %d rejections; want none and 1", wrong, adm.count("create"), counts.rejected)
		}
	}

	adm := newFakeAdmin()
	adm.racing[own.String()] = existingSub(own, onTopic(returnsTopic.String()))
	_, err := runPrepare(t, adm, cfg)
	wantErrorContaining(t, err, "created by someone else", own.String(), fmt.Sprintf("it is on topic %q", returnsTopic.String()))

	adm = newFakeAdmin(existingSub(own, nil)) // on ordersTopic, without the read's label
	if _, err := runPrepare(t, adm, cfg); err != nil {
		t.Fatalf("prepare with %s on its topic: %v", own, err)
	}
	if want := []string{"get " + own.String(), "get " + other.String(), "create " + other.String()}; !cmp.Equal(adm.calls(), want) {
		t.Errorf("calls %q, want %q: the existing one read as it is, the missing one created", adm.calls(), want)
	}
}

// The delete step removes every subscription of the read's own that
// carries its label, counting one already gone as removed, and leaves one
// without it (made by someone else under the same name); a failure is
// counted and logged, not fatal: the read is done.
func TestDeleteOwnedSubscriptions(t *testing.T) {
	sub := func(id string) model.Subscription { return model.SubscriptionOf("pubsubio-test", "nightly-"+id) }
	created, gone, denied, foreign, another := sub("orders"), sub("gone"), sub("denied"), sub("foreign"), sub("another")
	owned := ownedSubscriptions{Subscriptions: []model.Subscription{created, gone, denied, foreign, another}, Label: "thisread00"}
	labelled := func(value string) func(*pubsubpb.Subscription) {
		return func(s *pubsubpb.Subscription) { s.Labels = map[string]string{LabelRead: value} }
	}
	adm := newFakeAdmin(existingSub(created, labelled(owned.Label)), existingSub(denied, labelled(owned.Label)),
		existingSub(foreign, nil), existingSub(another, labelled("otherread0")))
	adm.errs["delete "+denied.String()] = status.Error(codes.PermissionDenied, "denied")
	useAdmin(t, adm)
	ctx := bundleContext()
	(&deleteOwnedFn{Owned: owned}).ProcessElement(ctx, 42)
	want := []string{
		"get " + created.String(), "delete " + created.String(),
		"get " + gone.String(),
		"get " + denied.String(), "delete " + denied.String(),
		"get " + foreign.String(), "get " + another.String(),
	}
	if diff := cmp.Diff(want, adm.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if _, err := adm.getSubscription(context.Background(), created.String()); status.Code(err) != codes.NotFound {
		t.Errorf("%s after the delete step: %v, want NOT_FOUND", created, err)
	}
	for _, s := range []model.Subscription{foreign, another} {
		if _, err := adm.getSubscription(context.Background(), s.String()); err != nil {
			t.Errorf("%s, which the read did not create, after the delete step: %v; want it left in place", s, err)
		}
	}
	if adm.closed != 1 {
		t.Errorf("admin closed %d times, want 1", adm.closed)
	}
	if got, want := counterSums(t, ctx), map[string]int64{"subscriptions_deleted": 2, "subscription_deletes_failed": 1}; !cmp.Equal(got, want) {
		t.Errorf("counters %v, want %v", got, want)
	}

	// Without a client, every subscription is a failure, counted.
	useAdminError(t, errors.New("no connection"))
	ctx = bundleContext()
	(&deleteOwnedFn{Owned: owned}).ProcessElement(ctx, 0)
	if got, want := counterSums(t, ctx), map[string]int64{"subscription_deletes_failed": 5}; !cmp.Equal(got, want) {
		t.Errorf("counters without a client %v, want %v", got, want)
	}
}

// useAdminError makes building the admin fail for the rest of the test.
func useAdminError(t *testing.T, err error) {
	t.Helper()
	prev := newAdmin
	newAdmin = func(context.Context, Config) (admin, error) { return nil, err }
	t.Cleanup(func() { newAdmin = prev })
}
