package source

import (
	"context"
	"errors"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics/metricstest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

// The cleanup DoFn connects to the owned subscriptions' project, deletes
// what the read created, and closes its client; without a client, every
// subscription counts as not deleted.
func TestDeleteOwnedFnClosesItsClient(t *testing.T) {
	f := newFakeServer(t)
	topic, _ := f.topicWithSubs(t, "cleanup", 0)
	owned := prepare.Owned{Label: "thisread00"}
	for _, id := range []string{"nightly-a", "nightly-b"} {
		sub := model.SubscriptionOf(testProject, id)
		if _, err := f.client.SubscriptionAdminClient.CreateSubscription(context.Background(), &pubsubpb.Subscription{
			Name: sub.String(), Topic: topic, Labels: map[string]string{LabelRead: owned.Label},
		}); err != nil {
			t.Fatal(err)
		}
		owned.Subscriptions = append(owned.Subscriptions, sub)
	}
	adm := newRecordingAdmin(t, f)
	var project string
	prev := newAdmin
	newAdmin = func(_ context.Context, p string, _ connection.Settings) (prepare.Admin, error) {
		project = p
		return adm, nil
	}
	t.Cleanup(func() { newAdmin = prev })

	ctx := metricstest.BundleContext()
	(&deleteOwnedFn{Owned: owned, Connection: f.conn}).ProcessElement(ctx, 0)
	if got := metricstest.CounterSums(t, ctx); !cmp.Equal(got, map[string]int64{"subscriptions_deleted": 2}) || adm.closed != 1 || project != testProject {
		t.Errorf("counters %v, client closed %d times, connected for project %q; want 2 deleted, closed once, %q", got, adm.closed, project, testProject)
	}

	newAdmin = func(context.Context, string, connection.Settings) (prepare.Admin, error) {
		return nil, errors.New("no connection")
	}
	ctx = metricstest.BundleContext()
	(&deleteOwnedFn{Owned: owned, Connection: f.conn}).ProcessElement(ctx, 0)
	if got := metricstest.CounterSums(t, ctx); !cmp.Equal(got, map[string]int64{"subscription_deletes_failed": 2}) {
		t.Errorf("counters without a client %v, want both not deleted", got)
	}
}
