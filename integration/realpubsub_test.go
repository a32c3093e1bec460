//go:build realpubsub

// Real-service tests of the read's prepare step: what the emulator cannot
// show. They are compiled only with the realpubsub build tag, so a plain
// `go test ./...` never selects them:
//
//	PUBSUB_IT_PROJECT=my-project \
//	PUBSUB_IT_DENIED_CREDENTIALS=/keys/no-pubsub-role.json \
//	go test -tags realpubsub ./integration/ -run RealPubSub
//
// PUBSUB_IT_PROJECT is a project where the caller's application-default
// credentials may create and delete topics and subscriptions
// (roles/pubsub.editor). PUBSUB_IT_DENIED_CREDENTIALS is the key file of a
// service account with no Pub/Sub role in that project. Selected with either
// missing, the tests fail instead of skipping, so a run meant to cover the
// service cannot pass without doing so. Topics and subscriptions get unique
// names and are deleted afterwards.
//
// These tests have not run where they were written: those machines have no
// Google Cloud project or credentials. They compile (go vet -tags
// realpubsub ./integration/) and await a run against the service.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
)

// requireEnv returns the variable's value, failing the test loudly when it
// is unset: a gated test that was selected must not pass by skipping.
func requireEnv(t *testing.T, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: the realpubsub tests need %s (see the comment at the top of realpubsub_test.go)", name, what)
	}
	return v
}

// realPubSub is a client for the service with application-default
// credentials, and a namer for this run's resources.
type realPubSub struct {
	project string
	client  *pubsub.Client
	run     string
}

func newRealPubSub(t *testing.T) *realPubSub {
	t.Helper()
	project := requireEnv(t, "PUBSUB_IT_PROJECT", "a Google Cloud project")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := connection.NewClient(ctx, project, connection.Settings{})
	if err != nil {
		t.Fatalf("connecting to Pub/Sub in %s with application-default credentials: %v", project, err)
	}
	t.Cleanup(func() { client.Close() })
	return &realPubSub{project: project, client: client, run: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}
}

func (r *realPubSub) deleteLater(t *testing.T, what string, del func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := del(ctx); err != nil && status.Code(err) != codes.NotFound {
			t.Errorf("deleting %s: %v", what, err)
		}
	})
}

func (r *realPubSub) topic(t *testing.T, prefix string) pubsubio.Topic {
	t.Helper()
	topic := pubsubio.TopicOf(r.project, "pubsubio-it-"+prefix+"-"+r.run)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic.String()}); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	r.deleteLater(t, topic.String(), func(ctx context.Context) error {
		return r.client.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: topic.String()})
	})
	return topic
}

// subscription names one this run may create; it is deleted afterwards.
func (r *realPubSub) subscription(t *testing.T, prefix string) pubsubio.Subscription {
	sub := pubsubio.SubscriptionOf(r.project, "pubsubio-it-"+prefix+"-"+r.run)
	r.deleteLater(t, sub.String(), func(ctx context.Context) error {
		return r.client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: sub.String()})
	})
	return sub
}

// Retention, expiration and filter persist on the service as the job
// created them (the emulator accepts and returns anything).
func TestRealPubSubCreateOptionsPersist(t *testing.T) {
	r := newRealPubSub(t)
	topic := r.topic(t, "options")
	full := r.subscription(t, "options-full")
	never := r.subscription(t, "options-never")
	opts := pubsubio.SubscriptionCreateOptions{
		Topic:               topic,
		AckDeadline:         45 * time.Second,
		MessageRetention:    3 * time.Hour,
		RetainAckedMessages: true,
		ExpirationTTL:       2 * 24 * time.Hour,
		Filter:              `attributes.kind = "order"`,
	}
	runSetup(t, pubsubio.Connection{}, 5*time.Second,
		pubsubio.SubscriptionSetup{Subscription: full, Create: opts},
		pubsubio.SubscriptionSetup{Subscription: never, Create: pubsubio.SubscriptionCreateOptions{Topic: topic, NeverExpire: true}})
	got := describe(t, r.client, full)
	if got.GetMessageRetentionDuration().AsDuration() != opts.MessageRetention || !got.GetRetainAckedMessages() ||
		got.GetExpirationPolicy().GetTtl().AsDuration() != opts.ExpirationTTL || got.GetFilter() != opts.Filter ||
		got.GetAckDeadlineSeconds() != 45 {
		t.Errorf("%s was created as %v, want the create options %+v", full, got, opts)
	}
	wantNeverExpires(t, r.client, never)
}

// A seek to a timestamp on an ordering-enabled subscription, under
// PER_KEY: the emulator does not implement it (UNIMPLEMENTED).
func TestRealPubSubSeekToTimestampOnOrderedSubscription(t *testing.T) {
	r := newRealPubSub(t)
	topic := r.topic(t, "ordered")
	sub := r.subscription(t, "ordered")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: sub.String(), Topic: topic.String(), EnableMessageOrdering: true, RetainAckedMessages: true,
	}); err != nil {
		t.Fatalf("creating %s: %v", sub, err)
	}
	before := time.Now().Add(-5 * time.Second)
	const n = 100
	pub := r.client.Publisher(topic.String())
	pub.EnableMessageOrdering = true
	var ids []string
	for i := range n {
		res := pub.Publish(ctx, &pubsub.Message{Data: []byte(fmt.Sprint(i)), OrderingKey: fmt.Sprintf("key-%d", i%4)})
		id, err := res.Get(ctx)
		if err != nil {
			t.Fatalf("publishing message %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	pub.Stop()
	receiveAll(t, r.client, sub.String(), n, 2*time.Minute)

	replay(t, sub, ids, pubsubio.ReadConfig{
		Ordering:    pubsubio.OrderingPerKey,
		Setup:       []pubsubio.SubscriptionSetup{{Subscription: sub, Start: pubsubio.StartFromTimestamp(before)}},
		IdleTimeout: 2 * time.Minute, // Pub/Sub applies a seek asynchronously, within about a minute
	})
}

// PERMISSION_DENIED from the service names the missing permission: the
// prepare step's first call, describing the subscription, as an account
// with no Pub/Sub role.
func TestRealPubSubPermissionDeniedNamesThePermission(t *testing.T) {
	r := newRealPubSub(t)
	denied := requireEnv(t, "PUBSUB_IT_DENIED_CREDENTIALS", "the key file of a service account with no Pub/Sub role")
	topic := r.topic(t, "denied")
	sub := r.subscription(t, "denied")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub.String(), Topic: topic.String()}); err != nil {
		t.Fatalf("creating %s: %v", sub, err)
	}
	p, _ := readInto(t, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{sub},
		Setup:         []pubsubio.SubscriptionSetup{{Subscription: sub, Start: pubsubio.StartLatest()}},
		IdleTimeout:   time.Minute,
		Connection:    pubsubio.Connection{CredentialsFile: denied},
	}, nil)
	err := runFails(t, p)
	wantInError(t, err, "permission denied describing", sub.String(), "pubsub.subscriptions.get")
}
