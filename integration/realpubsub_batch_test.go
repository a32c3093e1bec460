//go:build realpubsub

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
)

// Batch-rejection isolation on the real service. The sink checks every
// limit Pub/Sub states per message before sending (sink/validate.go), so
// the service rejects a single message for what only the topic knows: its
// schema. A topic with a schema validates every message of a publish
// request and answers INVALID_ARGUMENT to the whole request when one does
// not conform (the publish API has no partial success); the sink must
// republish the batch one message at a time and route only the message
// that is rejected alone.

// eventSchema is the Avro schema of the test topic, with JSON encoding:
// {"n": <int>}.
const eventSchema = `{"type":"record","name":"Event","fields":[{"name":"n","type":"int"}]}`

// createSchemaTopic creates an Avro schema and a topic validating JSON
// messages against it; both are deleted when the test ends, the topic
// first.
func (r *realPubSub) createSchemaTopic(t *testing.T, prefix string) pubsubio.Topic {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := connection.Dial(ctx, r.conn)
	if err != nil {
		t.Fatalf("connecting to Pub/Sub for schemas: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	schemas, err := vkit.NewSchemaClient(ctx, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatalf("creating a schema client: %v", err)
	}
	t.Cleanup(func() { schemas.Close() })
	schema, err := schemas.CreateSchema(ctx, &pubsubpb.CreateSchemaRequest{
		Parent:   "projects/" + r.project,
		SchemaId: r.name(prefix),
		Schema:   &pubsubpb.Schema{Type: pubsubpb.Schema_AVRO, Definition: eventSchema},
	})
	if err != nil {
		t.Fatalf("creating the schema %s: %v", r.name(prefix), err)
	}
	r.deleteLater(t, schema.GetName(), func(ctx context.Context) error {
		return schemas.DeleteSchema(ctx, &pubsubpb.DeleteSchemaRequest{Name: schema.GetName()})
	})
	return r.createTopic(t, prefix, &pubsubpb.Topic{
		SchemaSettings: &pubsubpb.SchemaSettings{Schema: schema.GetName(), Encoding: pubsubpb.Encoding_JSON},
	})
}

// One message that breaks the topic's schema, in one batch with 49 that
// conform: the 49 are published and arrive, exactly the one is
// dead-lettered with the service's INVALID_ARGUMENT, and the rejection is
// counted once (confirmed alone), not once per message of the batch.
func TestRealPubSubSchemaRejectionIsolatedFromItsBatch(t *testing.T) {
	t.Parallel()
	r := newRealPubSub(t)
	topic := r.createSchemaTopic(t, "schema")
	sub := r.createSubscription(t, "schema", topic, &pubsubpb.Subscription{})
	const n, bad = 50, 17
	payload := func(i int) string {
		if i == bad {
			return fmt.Sprintf(`{"n":"%d"}`, i) // a string where the schema has an int
		}
		return fmt.Sprintf(`{"n":%d}`, i)
	}
	msgs := sinkMessages(n, 0, func(i int, m *pubsubio.Message) { m.Data = []byte(payload(i)) })
	p, dead := writePipeline(t, pubsubio.WriteConfig{
		Topic:         topic,
		FailurePolicy: pubsubio.PolicyDeadLetter,
		// Everything in one batch, so the rejection has to be isolated.
		Publisher:  pubsubio.PublisherOptions{CountThreshold: 1000, DelayThreshold: time.Hour},
		Connection: r.conn,
	}, msgs, nil)
	res := runWithin(t, p, 3*time.Minute, func() string { return fmt.Sprintf("%d dead letters", collect.Len(dead)) })

	letters, err := collect.ItemsOf[pubsubio.FailedMessage](dead)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || string(letters[0].Message.Data) != payload(bad) ||
		letters[0].Stage != pubsubio.StagePublish || letters[0].Code != "INVALID_ARGUMENT" || letters[0].Topic != topic {
		t.Fatalf("dead letters %+v, want exactly message %d (%s), stage publish, INVALID_ARGUMENT", letters, bad, payload(bad))
	}
	t.Logf("the service's rejection: %s", letters[0].Error)
	for name, want := range map[string]int64{"records_sent": n - 1, "records_dead_lettered": 1, "publish_errors_INVALID_ARGUMENT": 1} {
		if got := counter(res, name); got != want {
			t.Errorf("%s %d, want %d", name, got, want)
		}
	}

	got := receiveAll(t, r.client, sub, n-1, 2*time.Minute)
	for i := range n {
		if m := got[payload(i)]; (m != nil) == (i == bad) {
			t.Errorf("message %d (%s) arrived: %v", i, payload(i), m != nil)
		}
	}
}
