package prepare

import (
	"context"
	"errors"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics/metricstest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The delete step removes every subscription of the read's own that
// carries its label, counting one already gone as removed, and leaves one
// without it (made by someone else under the same name); a failure is
// counted and logged, not fatal: the read is done.
func TestDeleteOwnedSubscriptions(t *testing.T) {
	sub := func(id string) model.Subscription { return model.SubscriptionOf("pubsubio-test", "nightly-"+id) }
	created, gone, denied, foreign, another := sub("orders"), sub("gone"), sub("denied"), sub("foreign"), sub("another")
	owned := Owned{Subscriptions: []model.Subscription{created, gone, denied, foreign, another}, Label: "thisread00"}
	labelled := func(value string) func(*pubsubpb.Subscription) {
		return func(s *pubsubpb.Subscription) { s.Labels = map[string]string{LabelRead: value} }
	}
	adm := newFakeAdmin(existingSub(created, labelled(owned.Label)), existingSub(denied, labelled(owned.Label)),
		existingSub(foreign, nil), existingSub(another, labelled("otherread0")))
	adm.errs["delete "+denied.String()] = status.Error(codes.PermissionDenied, "denied")
	ctx := metricstest.BundleContext()
	DeleteOwned(ctx, adm, owned)
	want := []string{
		"get " + created.String(), "delete " + created.String(),
		"get " + gone.String(),
		"get " + denied.String(), "delete " + denied.String(),
		"get " + foreign.String(), "get " + another.String(),
	}
	if diff := cmp.Diff(want, adm.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if _, err := adm.GetSubscription(context.Background(), created.String()); status.Code(err) != codes.NotFound {
		t.Errorf("%s after the delete step: %v, want NOT_FOUND", created, err)
	}
	for _, s := range []model.Subscription{foreign, another} {
		if _, err := adm.GetSubscription(context.Background(), s.String()); err != nil {
			t.Errorf("%s, which the read did not create, after the delete step: %v; want it left in place", s, err)
		}
	}
	if got, want := metricstest.CounterSums(t, ctx), map[string]int64{"subscriptions_deleted": 2, "subscription_deletes_failed": 1}; !cmp.Equal(got, want) {
		t.Errorf("counters %v, want %v", got, want)
	}

	// Without a client, every subscription is a failure, counted.
	ctx = metricstest.BundleContext()
	NoneDeleted(ctx, owned, errors.New("no connection"))
	if got, want := metricstest.CounterSums(t, ctx), map[string]int64{"subscription_deletes_failed": 5}; !cmp.Equal(got, want) {
		t.Errorf("counters without a client %v, want %v", got, want)
	}
}
