// Typed reads Avro orders from a Pub/Sub topic with a schema, decodes each
// into a Go struct with the schema revision it was published under, turns
// it into a total in a typed transform, and publishes the totals as JSON,
// each keeping the attributes of its order. An order that does not decode
// goes to a dead-letter topic. It then reads both topics back and exits
// non-zero unless every order became one total or one dead letter.
//
// With no flags it needs nothing installed: it starts an in-process
// Pub/Sub server (pstest), creates an Avro schema with two revisions (the
// second adds a coupon), a topic using it, the output and dead-letter
// topics, and publishes orders under both revisions and one that is not an
// order.
//
//	go run ./examples/typed
//	go run ./examples/typed --emulator=localhost:8085
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/api/option"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
)

var (
	emulator = flag.String("emulator", "", "host:port of a running Pub/Sub emulator; the example creates its own schema, topics and subscriptions there")
	orders   = flag.Int("orders", 40, "how many orders to publish (half under each schema revision)")
	readBack = flag.Duration("readback", time.Minute, "how long to wait for the outputs to be read back")
)

const project = "typed-project"

// The orders' Avro schema, as two revisions: the second adds a coupon.
const (
	orderSchemaV1 = `{"type": "record", "name": "Order", "namespace": "com.example.shop", "fields": [
  {"name": "id", "type": "string"},
  {"name": "amount_cents", "type": "long"},
  {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD"]}}]}`
	orderSchemaV2 = `{"type": "record", "name": "Order", "namespace": "com.example.shop", "fields": [
  {"name": "id", "type": "string"},
  {"name": "amount_cents", "type": "long"},
  {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD"]}},
  {"name": "coupon", "type": ["null", "string"], "default": null}]}`
)

// Order is an order as the pipeline reads it; Coupon stays nil for orders
// published under the first revision.
type Order struct {
	ID          string  `avro:"id"`
	AmountCents int64   `avro:"amount_cents"`
	Currency    string  `avro:"currency"`
	Coupon      *string `avro:"coupon"`
}

// Total is what the pipeline publishes for an order, as JSON.
type Total struct {
	OrderID    string  `json:"order_id"`
	Amount     float64 `json:"amount"`
	Currency   string  `json:"currency"`
	Discounted bool    `json:"discounted"`
}

// discount is what a coupon takes off.
const discount = 0.1

func init() {
	beam.RegisterType(reflect.TypeOf((*Order)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Total)(nil)).Elem())
	register.Function2x2(toTotal)
}

// toTotal is the typed transform: an order, beside its message, becomes a
// total beside the same message, whose attributes the output keeps.
func toTotal(m pubsubio.Message, o Order) (pubsubio.Message, Total) {
	t := Total{OrderID: o.ID, Amount: float64(o.AmountCents) / 100, Currency: o.Currency}
	if o.Coupon != nil {
		t.Amount, t.Discounted = math.Round(t.Amount*(1-discount)*100)/100, true
	}
	return m, t
}

func main() {
	flag.Parse()
	beam.Init()
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "typed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	endpoint := *emulator
	if endpoint == "" {
		srv := pstest.NewServer()
		defer srv.Close()
		endpoint = srv.Addr
		fmt.Printf("Started an in-process Pub/Sub server (pstest) at %s.\n", endpoint)
	}
	conn := pubsubio.Connection{EmulatorEndpoint: endpoint}
	env, err := setUp(ctx, conn, *emulator == "", *orders)
	if err != nil {
		return err
	}
	defer env.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{env.sub},
		MaxMessages:   int64(env.published),
		Connection:    conn,
	})
	// Each order is read with the revision it names; Topic makes each
	// instance of the DoFn check, in its Setup, that the topic's schema is
	// Avro in BINARY.
	decoded, undecodable := pubsubio.Decode(s, pubsubio.DecodeConfig{
		Format:       pubsubio.FormatAvro,
		Topic:        env.in,
		KeepMessage:  true,
		DecodePolicy: pubsubio.DecodeDeadLetter,
		Connection:   conn,
	}, reflect.TypeOf(Order{}), msgs)
	totals, unencodable := pubsubio.Encode(s, pubsubio.EncodeConfig{
		Format:        pubsubio.FormatJSON,
		Topic:         env.out,
		FailurePolicy: pubsubio.PolicyDeadLetter,
		Connection:    conn,
	}, beam.ParDo(s, toTotal, decoded))
	rejected := pubsubio.Write(s, pubsubio.WriteConfig{FailurePolicy: pubsubio.PolicyDeadLetter, Connection: conn}, totals)
	pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{Topic: env.deadLetters, Connection: conn},
		beam.Flatten(s, undecodable, unencodable, rejected))
	if err := beamx.Run(ctx, p); err != nil {
		return fmt.Errorf("pipeline failed: %w", err)
	}
	return env.check(ctx, *readBack)
}

// environment is what setUp created and what should come out.
type environment struct {
	client                *pubsub.Client
	sub                   pubsubio.Subscription
	in, out, deadLetters  pubsubio.Topic
	published, poison     int
	want                  map[string]Total // by order ID
	outSub, deadLetterSub string
	// pstest is set on the built-in server, which does not set the schema
	// attributes itself (attributes).
	pstest bool
}

func (env *environment) close() { env.client.Close() }

// setUp creates the schema, the topics and subscriptions, and publishes n
// orders and one poison message; onPstest says the server is the built-in
// one.
func setUp(ctx context.Context, conn pubsubio.Connection, onPstest bool, n int) (*environment, error) {
	client, err := connection.NewClient(ctx, project, conn)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	suffix := strings.ReplaceAll(time.Now().Format("150405.000"), ".", "-")
	env := &environment{client: client, want: map[string]Total{}, pstest: onPstest,
		in: pubsubio.TopicOf(project, "orders-"+suffix), out: pubsubio.TopicOf(project, "totals-"+suffix),
		deadLetters: pubsubio.TopicOf(project, "dead-letters-"+suffix)}
	schema := "projects/" + project + "/schemas/orders-" + suffix
	revisions, err := createSchema(ctx, conn, "orders-"+suffix, orderSchemaV1, orderSchemaV2)
	if err != nil {
		client.Close()
		return nil, err
	}
	topicWithSub := func(topic pubsubio.Topic, settings *pubsubpb.SchemaSettings) (string, error) {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic.String(), SchemaSettings: settings}); err != nil {
			return "", fmt.Errorf("creating %s: %w", topic, err)
		}
		sub := "projects/" + project + "/subscriptions/" + topic.ID
		if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic.String(), AckDeadlineSeconds: 30}); err != nil {
			return "", fmt.Errorf("creating %s: %w", sub, err)
		}
		return sub, nil
	}
	sub, err := topicWithSub(env.in, &pubsubpb.SchemaSettings{Schema: schema, Encoding: pubsubpb.Encoding_BINARY})
	if err == nil {
		env.sub, err = pubsubio.ParseSubscription(sub)
	}
	if err == nil {
		env.outSub, err = topicWithSub(env.out, nil)
	}
	if err == nil {
		env.deadLetterSub, err = topicWithSub(env.deadLetters, nil)
	}
	if err == nil {
		err = env.publish(ctx, schema, revisions, n)
	}
	if err != nil {
		client.Close()
		return nil, err
	}
	return env, nil
}

// createSchema creates the schema id with the revisions given, oldest
// first, and returns their IDs.
func createSchema(ctx context.Context, conn pubsubio.Connection, id string, definitions ...string) ([]string, error) {
	grpcConn, err := connection.Dial(ctx, conn)
	if err != nil {
		return nil, err
	}
	defer grpcConn.Close()
	schemas, err := vkit.NewSchemaClient(ctx, option.WithGRPCConn(grpcConn))
	if err != nil {
		return nil, err
	}
	sc, err := schemas.CreateSchema(ctx, &pubsubpb.CreateSchemaRequest{
		Parent: "projects/" + project, SchemaId: id, Schema: &pubsubpb.Schema{Type: pubsubpb.Schema_AVRO, Definition: definitions[0]},
	})
	if err != nil {
		return nil, fmt.Errorf("creating schema %s: %w", id, err)
	}
	revisions := []string{sc.GetRevisionId()}
	for _, d := range definitions[1:] {
		sc, err := schemas.CommitSchema(ctx, &pubsubpb.CommitSchemaRequest{
			Name: sc.GetName(), Schema: &pubsubpb.Schema{Type: pubsubpb.Schema_AVRO, Definition: d},
		})
		if err != nil {
			return nil, fmt.Errorf("committing to schema %s: %w", id, err)
		}
		revisions = append(revisions, sc.GetRevisionId())
	}
	return revisions, nil
}
