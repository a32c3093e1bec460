//go:build realpubsub

// The real-service suite: what the emulator cannot show, against Google
// Cloud Pub/Sub itself. It is compiled only with the realpubsub build tag,
// so a plain `go test ./...` never selects it:
//
//	PUBSUB_IT_PROJECT=my-project \
//	PUBSUB_IT_PROJECT_NUMBER=123456789012 \
//	PUBSUB_IT_DENIED_CREDENTIALS=/keys/no-pubsub-role.json \
//	go test -tags realpubsub ./integration/ -run RealPubSub -count=1 -v -timeout 30m
//
// PUBSUB_IT_PROJECT is a project where the test's identity may create,
// delete and set IAM policies on topics, subscriptions and schemas
// (roles/pubsub.admin). That identity is application-default credentials,
// or the service-account key file named by PUBSUB_IT_CREDENTIALS_FILE
// (optional), which every pipeline of the suite then uses too
// (Connection.CredentialsFile). PUBSUB_IT_PROJECT_NUMBER names Pub/Sub's
// own service account in that project, which the dead-letter test grants
// the roles forwarding needs. PUBSUB_IT_DENIED_CREDENTIALS is the key file
// of a service account with no Pub/Sub role in the project. A selected test
// whose variable is missing fails naming it instead of skipping, so a run
// meant to cover the service cannot pass without doing so.
//
// Every topic, subscription and schema gets a name unique to the run and
// is deleted when its test ends, failed or not (t.Cleanup, each deletion
// bounded to 30 s). What a killed test process leaves behind carries the
// label pubsubio-it=true, and subscriptions expire after a day unused.
//
// These tests have not run where they were written: those machines have no
// Google Cloud project, credentials or network route to Google. They
// compile and vet (go vet -tags realpubsub ./integration/) and await a run
// against the service.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
)

// The suite's variables.
const (
	envProject           = "PUBSUB_IT_PROJECT"
	envCredentials       = "PUBSUB_IT_CREDENTIALS_FILE"
	envProjectNumber     = "PUBSUB_IT_PROJECT_NUMBER"
	envDeniedCredentials = "PUBSUB_IT_DENIED_CREDENTIALS"
)

// realLabels mark what the suite creates, so that leftovers of a killed
// run can be found (gcloud pubsub topics list --filter=labels.pubsubio-it).
var realLabels = map[string]string{"pubsubio-it": "true"}

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

// realPubSub is a client for the service, the connection every pipeline
// of a test uses, and a namer for the test's resources.
type realPubSub struct {
	project string
	conn    pubsubio.Connection
	client  *pubsub.Client
	run     string
}

func newRealPubSub(t *testing.T) *realPubSub {
	t.Helper()
	project := requireEnv(t, envProject, "a Google Cloud project")
	// Application-default credentials unless a key file is named; never
	// anything else, and the path is not logged.
	conn := pubsubio.Connection{CredentialsFile: os.Getenv(envCredentials)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := connection.NewClient(ctx, project, conn)
	if err != nil {
		t.Fatalf("connecting to Pub/Sub in %s (application-default credentials, or %s): %v", project, envCredentials, err)
	}
	t.Cleanup(func() { client.Close() })
	return &realPubSub{project: project, conn: conn, client: client, run: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}
}

// name is a resource ID unique to this test run.
func (r *realPubSub) name(prefix string) string { return "pubsubio-it-" + prefix + "-" + r.run }

// deleteLater deletes a resource when the test ends, whatever its outcome,
// bounded so that a hung deletion cannot hold the suite.
func (r *realPubSub) deleteLater(t *testing.T, what string, del func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := del(ctx); err != nil && status.Code(err) != codes.NotFound {
			t.Errorf("deleting %s: %v", what, err)
		}
	})
}

// topic creates a plain topic for this run.
func (r *realPubSub) topic(t *testing.T, prefix string) pubsubio.Topic {
	t.Helper()
	return r.createTopic(t, prefix, &pubsubpb.Topic{})
}

// createTopic creates a topic from tmpl (its name and labels are set
// here) and deletes it when the test ends.
func (r *realPubSub) createTopic(t *testing.T, prefix string, tmpl *pubsubpb.Topic) pubsubio.Topic {
	t.Helper()
	topic := pubsubio.TopicOf(r.project, r.name(prefix))
	tmpl.Name, tmpl.Labels = topic.String(), realLabels
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.client.TopicAdminClient.CreateTopic(ctx, tmpl); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	r.deleteLater(t, topic.String(), func(ctx context.Context) error {
		return r.client.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: topic.String()})
	})
	return topic
}

// subscription names one this run may create (a job's prepare step does);
// it is deleted when the test ends.
func (r *realPubSub) subscription(t *testing.T, prefix string) pubsubio.Subscription {
	sub := pubsubio.SubscriptionOf(r.project, r.name(prefix))
	r.deleteLater(t, sub.String(), func(ctx context.Context) error {
		return r.client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: sub.String()})
	})
	return sub
}

// createSubscription creates a subscription to topic from tmpl (name,
// topic, labels and a one-day expiration are set here) and deletes it when
// the test ends.
func (r *realPubSub) createSubscription(t *testing.T, prefix string, topic pubsubio.Topic, tmpl *pubsubpb.Subscription) pubsubio.Subscription {
	t.Helper()
	sub := r.subscription(t, prefix)
	tmpl.Name, tmpl.Topic, tmpl.Labels = sub.String(), topic.String(), realLabels
	if tmpl.ExpirationPolicy == nil {
		// Pub/Sub's shortest: what a killed run leaves expires by itself.
		tmpl.ExpirationPolicy = &pubsubpb.ExpirationPolicy{Ttl: durationpb.New(24 * time.Hour)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.client.SubscriptionAdminClient.CreateSubscription(ctx, tmpl); err != nil {
		t.Fatalf("creating %s: %v", sub, err)
	}
	return sub
}

// publish publishes msgs to topic in order, waits for every result and
// returns the message IDs in the same order. With ordered, messages that
// share an ordering key are published in sequence (the client's ordered
// publishing).
func (r *realPubSub) publish(t *testing.T, topic pubsubio.Topic, ordered bool, msgs []*pubsub.Message) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pub := r.client.Publisher(topic.String())
	pub.EnableMessageOrdering = ordered
	defer pub.Stop()
	results := make([]*pubsub.PublishResult, len(msgs))
	for i, m := range msgs {
		results[i] = pub.Publish(ctx, m)
	}
	ids := make([]string, len(msgs))
	for i, res := range results {
		id, err := res.Get(ctx)
		if err != nil {
			t.Fatalf("publishing message %d of %d to %s: %v", i, len(msgs), topic, err)
		}
		ids[i] = id
	}
	return ids
}

// runWithin runs p on Prism and returns its metrics, failing the test
// when the job fails or has not finished within limit; progress describes
// what the job had done by then.
func runWithin(t *testing.T, p *beam.Pipeline, limit time.Duration, progress func() string) beam.PipelineResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, err := beamx.RunWithMetrics(ctx, p)
	if ctx.Err() != nil {
		t.Fatalf("the job did not finish within %v (%s): %v", limit, progress(), err)
	}
	if err != nil {
		t.Fatalf("pipeline failed (%s): %v", progress(), err)
	}
	return res
}

// Retention, expiration and filter persist on the service as the job
// created them (the emulator accepts and returns anything).
func TestRealPubSubCreateOptionsPersist(t *testing.T) {
	t.Parallel()
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
	runSetup(t, r.conn, 5*time.Second,
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

// PERMISSION_DENIED from the service names the missing permission: the
// prepare step's first call, describing the subscription, as an account
// with no Pub/Sub role.
func TestRealPubSubPermissionDeniedNamesThePermission(t *testing.T) {
	t.Parallel()
	r := newRealPubSub(t)
	denied := requireEnv(t, envDeniedCredentials, "the key file of a service account with no Pub/Sub role")
	topic := r.topic(t, "denied")
	sub := r.createSubscription(t, "denied", topic, &pubsubpb.Subscription{})
	p, _ := readInto(t, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{sub},
		Setup:         []pubsubio.SubscriptionSetup{{Subscription: sub, Start: pubsubio.StartLatest()}},
		IdleTimeout:   time.Minute,
		Connection:    pubsubio.Connection{CredentialsFile: denied},
	}, nil)
	err := runFails(t, p)
	wantInError(t, err, "permission denied describing", sub.String(), "pubsub.subscriptions.get")
}
