package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/linkedin/goavro/v2"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
)

var regions = []string{"north", "south", "west"}

// publish publishes n orders, alternating between the two revisions, and
// one message that is not an order, and records what should come out.
func (env *environment) publish(ctx context.Context, schema string, revisions []string, n int) error {
	var codecs []*goavro.Codec
	for _, def := range []string{orderSchemaV1, orderSchemaV2} {
		c, err := goavro.NewCodec(def)
		if err != nil {
			return err
		}
		codecs = append(codecs, c)
	}
	pub := env.client.Publisher(env.in.String())
	defer pub.Stop()
	var results []*pubsub.PublishResult
	for i := range n {
		rev := i % len(revisions)
		o := map[string]any{"id": fmt.Sprintf("order-%03d", i), "amount_cents": int64(1000 + 37*i), "currency": []string{"EUR", "USD"}[i/2%2]}
		want := Total{OrderID: o["id"].(string), Amount: float64(o["amount_cents"].(int64)) / 100, Currency: o["currency"].(string)}
		if rev == 1 {
			o["coupon"] = nil
			if i%4 == 1 {
				o["coupon"] = goavro.Union("string", "SPRING")
				want.Amount, want.Discounted = math.Round(want.Amount*(1-discount)*100)/100, true
			}
		}
		data, err := codecs[rev].BinaryFromNative(nil, o)
		if err != nil {
			return err
		}
		env.want[want.OrderID] = want
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: env.attributes(regions[i%len(regions)], schema, revisions[rev])}))
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			return fmt.Errorf("publishing to %s: %w", env.in, err)
		}
	}
	env.published = n
	// Pub/Sub refuses a payload that is none of the schema's revisions, and
	// so does the emulator; pstest takes it, and the pipeline dead-letters it.
	_, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("not an order"), Attributes: env.attributes("east", schema, revisions[1])}).Get(ctx)
	if err == nil {
		env.published++
		env.poison = 1
	}
	fmt.Printf("Published %d orders to %s under revisions %v of its schema; a message that is not an order was %s.\n",
		n, env.in, revisions, map[bool]string{true: "published", false: "refused by the server: " + fmt.Sprint(err)}[err == nil])
	return nil
}

// attributes are what a message is published with: its region and, on
// the built-in pstest server alone, the schema attributes as Pub/Sub would
// set them. Pub/Sub sets them itself on every message published to a
// topic with a schema, and refuses attribute keys starting with "goog"
// from a publisher; the emulator sets them too, replacing any a publisher
// sent; pstest neither sets nor refuses them, so without them its
// messages would name no revision.
func (env *environment) attributes(region, schema, revision string) map[string]string {
	if !env.pstest {
		return map[string]string{"region": region}
	}
	return map[string]string{
		"region":                         region,
		pubsubio.SchemaNameAttribute:     schema,
		pubsubio.SchemaRevisionAttribute: revision,
		pubsubio.SchemaEncodingAttribute: string(pubsubio.EncodingBinary),
	}
}

// check reads the totals and the dead letters back, and returns an error
// unless every order became its total, with its region and without the
// schema attributes, and the poison message one dead letter.
func (env *environment) check(ctx context.Context, timeout time.Duration) error {
	var problems []string
	totals := receive(ctx, env.client, env.outSub, len(env.want), timeout, func(m *pubsub.Message) {
		var got Total
		if err := json.Unmarshal(m.Data, &got); err != nil {
			problems = append(problems, fmt.Sprintf("output %q is not a total: %v", m.Data, err))
			return
		}
		if got != env.want[got.OrderID] {
			problems = append(problems, fmt.Sprintf("total %+v, want %+v", got, env.want[got.OrderID]))
		}
		if _, ok := m.Attributes["region"]; !ok || len(m.Attributes) != 1 {
			problems = append(problems, fmt.Sprintf("total %s has attributes %v; want its order's region alone", got.OrderID, m.Attributes))
		}
	})
	dead := receive(ctx, env.client, env.deadLetterSub, env.poison, timeout, func(m *pubsub.Message) {
		f, err := dlq.Decode(pubsubio.Message{Data: m.Data, Attributes: m.Attributes})
		if err != nil || f.Stage != pubsubio.StageDecode {
			problems = append(problems, fmt.Sprintf("dead letter %q: stage %q, %v", m.Data, f.Stage, err))
			return
		}
		fmt.Printf("  dead letter: %q, stage %s: %s\n", f.Message.Data, f.Stage, f.Error)
	})
	fmt.Printf("Read back %d of %d totals from %s and %d of %d dead letters.\n", totals, len(env.want), env.out, dead, env.poison)
	if totals < len(env.want) || dead < env.poison {
		problems = append(problems, fmt.Sprintf("fewer outputs than orders within %v; rerun with a longer --readback, or check the pipeline's log", timeout))
	}
	if len(problems) > 0 {
		return fmt.Errorf("what came out does not add up:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// receive acks and counts distinct payloads on sub until want arrived or
// timeout passed, calling each for every distinct payload: a total
// published twice (delivery is at-least-once) counts once.
func receive(ctx context.Context, client *pubsub.Client, sub string, want int, timeout time.Duration, each func(*pubsub.Message)) int {
	if want == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]bool{}
	_ = client.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if seen[string(m.Data)] {
			return
		}
		seen[string(m.Data)] = true
		each(m)
		if len(seen) >= want {
			cancel()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	return len(seen)
}
