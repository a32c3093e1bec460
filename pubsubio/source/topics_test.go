package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

var (
	ordersTopic  = model.TopicOf("pubsubio-test", "orders")
	returnsTopic = model.TopicOf("other-project", "returns")
)

// Each topic becomes a subscription of the read's own, in the topic's
// project, named after TopicSubscriptions.Name and created with a one-day
// TTL, a retention within it and the labels that say who made it; the
// user's options and labels are kept. Defaulting again changes nothing.
func TestTopicsBecomeSubscriptionsOfTheRead(t *testing.T) {
	cfg := testConfig(t, func(c *Config) {
		c.Topics = []model.Topic{ordersTopic, returnsTopic}
		c.TopicSubscriptions = TopicSubscriptionOptions{Name: "nightly", Create: SubscriptionCreateOptions{
			AckDeadline: time.Minute,
			Labels:      map[string]string{"team": "billing"},
		}}
	})
	wantOwned := []model.Subscription{
		model.SubscriptionOf("pubsubio-test", "nightly-orders"),
		model.SubscriptionOf("other-project", "nightly-returns"),
	}
	if diff := cmp.Diff(wantOwned, cfg.owned); diff != "" {
		t.Errorf("owned subscriptions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(testSubs(1), wantOwned...), cfg.Subscriptions); diff != "" {
		t.Errorf("Subscriptions (-want +got):\n%s", diff)
	}
	if len(cfg.Topics) != 0 {
		t.Errorf("Topics = %v after defaulting, want them moved into Subscriptions", cfg.Topics)
	}
	wantLabels := map[string]string{labelCreatedBy: labelCreatedByValue, labelName: "nightly", "team": "billing"}
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
	again, err := cfg.withDefaults()
	if err != nil || !cmp.Equal(again.Subscriptions, cfg.Subscriptions) || len(again.Setup) != len(cfg.Setup) {
		t.Errorf("defaulting twice: %v, %v subscriptions and %d setup entries; want the same %d and %d", err, again.Subscriptions, len(again.Setup), len(cfg.Subscriptions), len(cfg.Setup))
	}
}

// Without a name, each construction generates one, which then travels in
// the configuration: two constructions never share subscriptions.
func TestTopicSubscriptionNameGeneratedPerConstruction(t *testing.T) {
	build := func() Config {
		return testConfig(t, func(c *Config) { c.Subscriptions, c.Topics = nil, []model.Topic{ordersTopic} })
	}
	a, b := build(), build()
	if a.owned[0] == b.owned[0] {
		t.Errorf("two constructions both read %s; want a subscription each", a.owned[0])
	}
	for _, cfg := range []Config{a, b} {
		name := cfg.TopicSubscriptions.Name
		if !strings.HasPrefix(name, generatedNamePrefix) || len(name) != len(generatedNamePrefix)+10 || cfg.owned[0].ID != name+"-orders" {
			t.Errorf("generated name %q, subscription %s; want %s and 10 characters, then -orders", name, cfg.owned[0], generatedNamePrefix)
		}
		if got := cfg.setupFor(cfg.owned[0]).Create.Labels[labelName]; got != name {
			t.Errorf("label %s = %q, want the generated name %q", labelName, got, name)
		}
	}
}

// An option wrong for every topic is said once, not once per topic.
func TestTopicErrorSaidOnce(t *testing.T) {
	cfg := validConfig()
	cfg.Topics = []model.Topic{ordersTopic, returnsTopic}
	cfg.TopicSubscriptions.Create.ExpirationTTL = time.Hour
	_, err := cfg.withDefaults()
	if n := strings.Count(fmt.Sprint(err), "must be at least 24h0m0s"); n != 1 {
		t.Errorf("the TTL error is said %d times, want once:\n%v", n, err)
	}
}

// The delete step removes every owned subscription, counting one already
// gone as removed, and a failure is logged, not fatal: the read is done.
func TestDeleteOwnedSubscriptions(t *testing.T) {
	owned := []model.Subscription{
		model.SubscriptionOf("pubsubio-test", "nightly-orders"),
		model.SubscriptionOf("pubsubio-test", "nightly-gone"),
		model.SubscriptionOf("pubsubio-test", "nightly-denied"),
	}
	adm := newFakeAdmin(existingSub(owned[0], nil), existingSub(owned[2], nil))
	adm.errs["delete "+owned[2].String()] = status.Error(codes.PermissionDenied, "denied")
	useAdmin(t, adm)
	(&deleteOwnedFn{Owned: owned}).ProcessElement(context.Background(), 42)
	want := []string{"delete " + owned[0].String(), "delete " + owned[1].String(), "delete " + owned[2].String()}
	if diff := cmp.Diff(want, adm.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if _, err := adm.getSubscription(context.Background(), owned[0].String()); status.Code(err) != codes.NotFound {
		t.Errorf("%s after the delete step: %v, want NOT_FOUND", owned[0], err)
	}
	if adm.closed != 1 {
		t.Errorf("admin closed %d times, want 1", adm.closed)
	}

	useAdminError(t, errors.New("no connection"))
	(&deleteOwnedFn{Owned: owned}).ProcessElement(context.Background(), 0)
}

// useAdminError makes building the admin fail for the rest of the test.
func useAdminError(t *testing.T, err error) {
	t.Helper()
	prev := newAdmin
	newAdmin = func(context.Context, Config) (admin, error) { return nil, err }
	t.Cleanup(func() { newAdmin = prev })
}
