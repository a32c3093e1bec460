package source

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

const testProject = "pubsubio-test"

// fakeServer is an in-process pstest server with a client bound to it.
type fakeServer struct {
	srv    *pstest.Server
	client *pubsub.Client
	conn   connection.Settings
}

func newFakeServer(t *testing.T, opts ...pstest.ServerReactorOption) *fakeServer {
	t.Helper()
	srv := pstest.NewServer(opts...)
	conn := connection.Settings{EmulatorEndpoint: srv.Addr}
	client, err := connection.NewClient(context.Background(), testProject, conn)
	if err != nil {
		t.Fatalf("client for pstest: %v", err)
	}
	t.Cleanup(func() {
		client.Close()
		srv.Close()
	})
	return &fakeServer{srv: srv, client: client, conn: conn}
}

// topicWithSubs creates a topic and n subscriptions on it.
func (f *fakeServer) topicWithSubs(t *testing.T, name string, n int) (string, []model.Subscription) {
	t.Helper()
	ctx := context.Background()
	topic := fmt.Sprintf("projects/%s/topics/%s", testProject, name)
	if _, err := f.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	var subs []model.Subscription
	for i := range n {
		sub := model.SubscriptionOf(testProject, fmt.Sprintf("%s-sub-%d", name, i))
		if _, err := f.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: sub.String(), Topic: topic, AckDeadlineSeconds: 10,
		}); err != nil {
			t.Fatalf("create subscription: %v", err)
		}
		subs = append(subs, sub)
	}
	return topic, subs
}

// publish publishes n messages and returns their IDs.
func (f *fakeServer) publish(t *testing.T, topic string, n int, attrs func(int) map[string]string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := f.client.Publisher(topic)
	defer pub.Stop()
	results := make([]*pubsub.PublishResult, n)
	for i := range n {
		m := &pubsub.Message{Data: fmt.Appendf(nil, "message-%d", i)}
		if attrs != nil {
			m.Attributes = attrs(i)
		}
		results[i] = pub.Publish(ctx, m)
	}
	ids := make([]string, n)
	for i, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}
