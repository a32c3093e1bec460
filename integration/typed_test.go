package integration

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/linkedin/goavro/v2"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/type/money"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
)

// Typed messages end to end on Prism against the emulator, which keeps
// schemas as Pub/Sub does: it validates every publish to a topic with a
// schema against the schema's revisions, and stamps each message with the
// schema attributes. Package typed covers the same against pstest, with
// faults.

func init() {
	beam.RegisterType(reflect.TypeOf((*money.Money)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*charge)(nil)).Elem())
	register.Function2x2(toCharge)
	beam.RegisterType(reflect.TypeOf((*sensorReading)(nil)).Elem())
	register.Function1x1(scaled)
}

// charge is what the pipeline makes of a payment.
type charge struct {
	Order    string `avro:"order"`
	Cents    int64  `avro:"cents"`
	Currency string `avro:"currency"`
}

const chargeSchema = `{"type": "record", "name": "Charge", "fields": [
  {"name": "order", "type": "string"}, {"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]}`

func toCharge(m pubsubio.Message, p *money.Money) (pubsubio.Message, charge) {
	return m, charge{Order: m.Attributes["order"], Cents: p.GetUnits()*100 + int64(p.GetNanos())/1e7, Currency: p.GetCurrencyCode()}
}

// Protocol Buffer payments, read and decoded with their messages, become
// a Go struct, encoded as Avro for another topic and written; a payload
// that is not a payment goes to the dead letters.
func TestTypedOnEmulator(t *testing.T) {
	t.Parallel()
	const payments = 30
	e := emulator.Require(t)
	in := e.CreateTopic(t, "typed-in")
	sub := e.CreateSubscription(t, in, "typed-in", 10*time.Second)
	out := e.CreateTopic(t, "typed-out")
	outSub := e.CreateSubscription(t, out, "typed-out", 10*time.Second)
	client := e.Client(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pub := client.Publisher(in.String())
	var results []*pubsub.PublishResult
	for i := range payments {
		data, err := proto.Marshal(&money.Money{CurrencyCode: "EUR", Units: int64(i), Nanos: 250_000_000})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: map[string]string{"order": fmt.Sprintf("o-%d", i)}}))
	}
	poison := pub.Publish(ctx, &pubsub.Message{Data: []byte{0x0a, 0x7f, 'x'}, Attributes: map[string]string{"order": "bad"}})
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	poisonID, err := poison.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pub.Stop()

	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{sub}, MaxMessages: payments + 1, Connection: conn})
	paid, undecodable := pubsubio.Decode(s, pubsubio.DecodeConfig{
		Format: pubsubio.FormatProtobuf, KeepMessage: true, DecodePolicy: pubsubio.DecodeDeadLetter,
	}, reflect.TypeOf((*money.Money)(nil)), msgs)
	encoded, unencodable := pubsubio.Encode(s, pubsubio.EncodeConfig{
		Format: pubsubio.FormatAvro, AvroSchema: chargeSchema, Topic: out, Connection: conn,
	}, beam.ParDo(s, toCharge, paid))
	rejected := pubsubio.Write(s, pubsubio.WriteConfig{Connection: conn, CreateDisposition: pubsubio.CreateNever}, encoded)
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, beam.ParDo(s, deadLetterKey, beam.Flatten(s, undecodable, unencodable, rejected)))
	if err := beamx.Run(ctx, p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}

	if got, want := tally(t, bucket), (map[string]int{poisonID + "/decode/" + sub.ID: 1}); !reflect.DeepEqual(got, want) {
		t.Errorf("dead letters %v, want %v", got, want)
	}
	codec, err := goavro.NewCodec(chargeSchema)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for data, m := range receiveAll(t, client, outSub, payments, time.Minute) {
		native, rest, err := codec.NativeFromBinary([]byte(data))
		if err != nil || len(rest) > 0 {
			t.Fatalf("an output payload is not a Charge (%d bytes left): %v", len(rest), err)
		}
		rec := native.(map[string]any)
		var i int
		if _, err := fmt.Sscanf(rec["order"].(string), "o-%d", &i); err != nil || rec["cents"] != int64(i*100+25) || rec["currency"] != "EUR" {
			t.Errorf("charge %v, from payment %d", rec, i)
		}
		if m.Attributes["order"] != rec["order"] || len(m.Attributes) != 1 {
			t.Errorf("charge %v has attributes %v; want the payment's order alone", rec, m.Attributes)
		}
		seen[rec["order"].(string)] = true
	}
	if len(seen) != payments {
		t.Errorf("%d distinct charges arrived, want %d", len(seen), payments)
	}
}

// sensorReading is what the schema test reads and writes.
type sensorReading struct {
	Sensor string  `avro:"sensor"`
	Value  float64 `avro:"value"`
	Unit   *string `avro:"unit"`
}

const (
	sensorSchemaV1 = `{"type": "record", "name": "Reading", "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]}`
	sensorSchemaV2 = `{"type": "record", "name": "Reading", "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}, {"name": "unit", "type": ["null", "string"], "default": null}]}`
)

func scaled(r sensorReading) sensorReading {
	r.Value *= 10
	return r
}

// Avro readings published under two revisions of a schema decode, each
// with its own revision fetched from the schema service, and are
// republished in Avro's JSON encoding to a topic whose settings the encoder
// checked, which the emulator accepts as valid; a format that does not
// match that topic fails the pipeline before the first value. Every third
// reading is published with schema attributes of its own, naming a
// revision that does not exist: the emulator replaces them with its own
// (else they would be dead letters), as the package documents.
func TestTypedSchemasOnEmulator(t *testing.T) {
	t.Parallel()
	const perRevision = 10
	e := emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	schemas := schemaClient(t, conn)
	in := e.CreateTopic(t, "typed-schema-in")
	schema := "projects/" + in.Project + "/schemas/" + in.ID
	if _, err := schemas.CreateSchema(ctx, &pubsubpb.CreateSchemaRequest{Parent: "projects/" + in.Project, SchemaId: in.ID, Schema: &pubsubpb.Schema{Type: pubsubpb.Schema_AVRO, Definition: sensorSchemaV1}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { schemas.DeleteSchema(context.Background(), &pubsubpb.DeleteSchemaRequest{Name: schema}) })
	if _, err := schemas.CommitSchema(ctx, &pubsubpb.CommitSchemaRequest{Name: schema, Schema: &pubsubpb.Schema{Type: pubsubpb.Schema_AVRO, Definition: sensorSchemaV2}}); err != nil {
		t.Fatal(err)
	}
	client := e.Client(t)
	withSchema := func(topic pubsubio.Topic, enc pubsubpb.Encoding) {
		if _, err := client.TopicAdminClient.UpdateTopic(ctx, &pubsubpb.UpdateTopicRequest{
			Topic:      &pubsubpb.Topic{Name: topic.String(), SchemaSettings: &pubsubpb.SchemaSettings{Schema: schema, Encoding: enc}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"schema_settings"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	withSchema(in, pubsubpb.Encoding_BINARY)
	sub := e.CreateSubscription(t, in, "typed-schema-in", 10*time.Second)
	out := e.CreateTopic(t, "typed-schema-out")
	withSchema(out, pubsubpb.Encoding_JSON)
	outSub := e.CreateSubscription(t, out, "typed-schema-out", 10*time.Second)

	v1, err := goavro.NewCodec(sensorSchemaV1)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := goavro.NewCodec(sensorSchemaV2)
	if err != nil {
		t.Fatal(err)
	}
	pub := client.Publisher(in.String())
	var results []*pubsub.PublishResult
	for i := range 2 * perRevision {
		c, native := v1, map[string]any{"sensor": fmt.Sprintf("s-%d", i), "value": float64(i)}
		if i >= perRevision {
			c, native["unit"] = v2, goavro.Union("string", "K")
		}
		data, err := c.BinaryFromNative(nil, native)
		if err != nil {
			t.Fatal(err)
		}
		var attrs map[string]string
		if i%3 == 0 {
			attrs = map[string]string{pubsubio.SchemaNameAttribute: schema, pubsubio.SchemaRevisionAttribute: "gone1234", pubsubio.SchemaEncodingAttribute: "JSON"}
		}
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs}))
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatalf("the emulator refused a reading: %v", err)
		}
	}
	pub.Stop()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{sub}, MaxMessages: 2 * perRevision, Connection: conn})
	readings, undecodable := pubsubio.Decode(s, pubsubio.DecodeConfig{
		Format: pubsubio.FormatAvro, Topic: in, DecodePolicy: pubsubio.DecodeDeadLetter, Connection: conn,
	}, reflect.TypeOf(sensorReading{}), msgs)
	encoded, unencodable := pubsubio.Encode(s, pubsubio.EncodeConfig{
		Format: pubsubio.FormatAvro, Encoding: pubsubio.EncodingJSON, Topic: out, Connection: conn,
	}, beam.ParDo(s, scaled, readings))
	rejected := pubsubio.Write(s, pubsubio.WriteConfig{Connection: conn, CreateDisposition: pubsubio.CreateNever, FailurePolicy: pubsubio.PolicyDeadLetter}, encoded)
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, beam.ParDo(s, deadLetterKey, beam.Flatten(s, undecodable, unencodable, rejected)))
	if err := beamx.Run(ctx, p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	if got := tally(t, bucket); len(got) > 0 {
		t.Errorf("dead letters: %v", got)
	}
	seen := map[string]bool{}
	for data, m := range receiveAll(t, client, outSub, 2*perRevision, time.Minute) {
		native, _, err := v2.NativeFromTextual([]byte(data))
		if err != nil {
			t.Fatalf("an output payload %q is not a Reading in Avro JSON: %v", data, err)
		}
		rec := native.(map[string]any)
		var i int
		fmt.Sscanf(rec["sensor"].(string), "s-%d", &i)
		unit, _ := rec["unit"].(map[string]any)
		if rec["value"] != float64(10*i) || (i >= perRevision) != (unit["string"] == "K") {
			t.Errorf("reading %q from published reading %d", data, i)
		}
		if m.Attributes["googclient_schemaencoding"] != "JSON" || m.Attributes["googclient_schemaname"] != schema {
			t.Errorf("reading %q arrived with attributes %v", data, m.Attributes)
		}
		seen[rec["sensor"].(string)] = true
	}
	if len(seen) != 2*perRevision {
		t.Errorf("%d distinct readings arrived, want %d", len(seen), 2*perRevision)
	}

	p, s = beam.NewPipelineWithRoot()
	pubsubio.Encode(s, pubsubio.EncodeConfig{Format: pubsubio.FormatJSON, Topic: out, Connection: conn}, beam.Create(s, sensorReading{Sensor: "x"}))
	wantInError(t, runFails(t, p), "Topic "+out.String()+" has schema "+schema+" (AVRO, encoding JSON)", "Format JSON is plain JSON")
}

func schemaClient(t *testing.T, conn pubsubio.Connection) *vkit.SchemaClient {
	t.Helper()
	grpcConn, err := connection.Dial(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	c, err := vkit.NewSchemaClient(context.Background(), option.WithGRPCConn(grpcConn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { grpcConn.Close() })
	return c
}

// Under DecodeFail a payload that does not decode fails the bundle naming
// the message, and the read gives that message back before the job's
// failure reaches the launcher: never acked, a ModifyAckDeadline of 0
// recorded. On the pstest-backed fake, for its per-message records.
// Emulator.Publish's payloads ("0.......") are not JSON.
func TestTypedDecodeFailGivesTheMessageBack(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	topic := e.CreateTopic(t, "typed-fail")
	sub := e.CreateSubscription(t, topic, "typed-fail", 10*time.Second)
	ids := e.Publish(t, topic, 1, 8, nil)
	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{sub}, MaxMessages: 1, Connection: conn})
	pubsubio.Decode(s, pubsubio.DecodeConfig{Format: pubsubio.FormatJSON}, reflect.TypeOf(sensorReading{}), msgs)
	wantInError(t, runFails(t, p), fmt.Sprintf("message %q from %s cannot be decoded as JSON", ids[0], sub), "gives the message back")
	m := srv.Message(ids[0])
	nacked := false
	for _, ma := range m.Modacks {
		nacked = nacked || ma.AckDeadline == 0
	}
	if m.Acks != 0 || !nacked {
		t.Errorf("message %s: %d acks, modacks %+v; want no ack and a ModifyAckDeadline of 0 (the give-back)", ids[0], m.Acks, m.Modacks)
	}
}
