package integration

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/linkedin/goavro/v2"
	"google.golang.org/genproto/googleapis/type/money"
	"google.golang.org/protobuf/proto"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Typed messages end to end on Prism against the emulator: Protocol Buffer
// payments read and decoded with their messages, changed into a Go struct,
// encoded as Avro for another topic and written; a payload that is not a
// payment goes to the dead letters. The schema service's part runs against
// pstest, in package typed.

func init() {
	beam.RegisterType(reflect.TypeOf((*money.Money)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*charge)(nil)).Elem())
	register.Function2x2(toCharge)
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

func TestTypedOnEmulator(t *testing.T) {
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
		Format: pubsubio.TypedProtobuf, KeepMessage: true, DecodePolicy: pubsubio.DecodeDeadLetter,
	}, reflect.TypeOf((*money.Money)(nil)), msgs)
	encoded, unencodable := pubsubio.Encode(s, pubsubio.EncodeConfig{
		Format: pubsubio.TypedAvro, AvroSchema: chargeSchema, Topic: out, Connection: conn,
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
