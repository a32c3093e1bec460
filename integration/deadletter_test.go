package integration

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Dead-letter tests: dlq.Write on Prism against the emulator, read back
// from a subscription on the dead-letter topic and decoded with dlq.Decode.

// deadLetterFailures returns n failures of every shape a pipeline emits:
// source decode failures, sink publish and validate failures, one with a
// megabyte-long error and one with more attributes than an envelope can
// carry. Failure i has the payload "dl-<i>".
func deadLetterFailures(n int) []dlq.FailedMessage {
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)
	sub := pubsubio.SubscriptionOf(emulator.Project, "orders-sub")
	topic := pubsubio.TopicOf(emulator.Project, "orders")
	out := make([]dlq.FailedMessage, n)
	for i := range out {
		m := pubsubio.Message{Data: []byte(fmt.Sprintf("dl-%d", i)), Attributes: map[string]string{"i": fmt.Sprint(i), "kind": "test"}}
		var f dlq.FailedMessage
		switch i % 3 {
		case 0:
			m.ID = fmt.Sprint(1000 + i)
			m.OrderingKey = fmt.Sprintf("key-%d", i%5)
			m.PublishTime = at.Add(-time.Duration(i) * time.Second)
			m.DeliveryAttempt = 1 + i%4
			m.Subscription = sub
			f = dlq.New(dlq.StageDecode, m, fmt.Errorf("the payload is not JSON (format JSON)"), m.DeliveryAttempt, at)
			f.Subscription = sub
		case 1:
			f = dlq.New(dlq.StagePublish, m, status.Error(codes.InvalidArgument, "Invalid attribute"), 2, at)
			f.Topic = topic
		case 2:
			f = dlq.New(dlq.StageValidate, m, status.Error(codes.InvalidArgument, "the message breaks Pub/Sub's limits"), 0, at)
			f.Topic = topic
		}
		out[i] = f
	}
	out[1].Error = strings.Repeat("stack frame\n", 3<<20/12) // 3 MiB, as a hand-built dead letter could carry
	for k := range 130 {
		out[2].Message.Attributes[fmt.Sprintf("extra-%03d", k)] = "x"
	}
	return out
}

// expectedDeadLetter is what a consumer decodes of f: the routing fields
// are not carried, and the error is cut to dlq.MaxErrorBytes, "..." marking
// the cut (the errors here are ASCII, so no rune is split).
func expectedDeadLetter(f dlq.FailedMessage) dlq.FailedMessage {
	f.Message.Topic = pubsubio.Topic{}
	f.Message.Subscription = pubsubio.Subscription{}
	if len(f.Error) > dlq.MaxErrorBytes {
		f.Error = f.Error[:dlq.MaxErrorBytes-len("...")] + "..."
	}
	return f
}

// sameDeadLetter compares times by instant.
func sameDeadLetter(a, b dlq.FailedMessage) bool {
	a.Time, b.Time = a.Time.UTC(), b.Time.UTC()
	a.Message.PublishTime, b.Message.PublishTime = a.Message.PublishTime.UTC(), b.Message.PublishTime.UTC()
	return reflect.DeepEqual(a, b)
}

// decodeDeadLetter decodes one message received from a dead-letter topic.
func decodeDeadLetter(t *testing.T, m *pubsub.Message) dlq.FailedMessage {
	t.Helper()
	f, err := dlq.Decode(model.Message{ID: m.ID, Data: m.Data, Attributes: m.Attributes})
	if err != nil {
		t.Fatalf("dead letter %s: %v", m.ID, err)
	}
	return f
}

// Every dead letter written on Prism arrives on the dead-letter topic once
// and decodes to what was written.
func TestDeadLetterWriteRoundTrip(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	topic := e.CreateTopic(t, "dead-letters")
	sub := e.CreateSubscription(t, topic, "dead-letters", 0)
	const n = 300
	sent := deadLetterFailures(n)

	p, s := beam.NewPipelineWithRoot()
	dlq.Write(s, dlq.Config{
		Topic:               topic,
		MaxInFlightMessages: 64, // waits at the bound as well as at the end of bundles
		Connection:          pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, beam.CreateList(s, sent))
	r, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	if got := counter(r, "dead_letters_published"); got != n {
		t.Errorf("dead_letters_published %d, want %d", got, n)
	}

	got := receiveAll(t, e.Client(t), sub, n, time.Minute)
	for i, f := range sent {
		m := got[string(f.Message.Data)]
		if m == nil {
			t.Errorf("dead letter %d missing", i)
			continue
		}
		dec := decodeDeadLetter(t, m)
		want := expectedDeadLetter(f)
		if i == 2 {
			// More attributes than fit: the envelope says what it left out,
			// and what it carried is the original's.
			if !strings.Contains(m.Attributes[dlq.AttrOmitted], "over Pub/Sub's 100 attributes") {
				t.Errorf("dead letter 2: %s = %q", dlq.AttrOmitted, m.Attributes[dlq.AttrOmitted])
			}
			for k, v := range dec.Message.Attributes {
				if f.Message.Attributes[k] != v {
					t.Errorf("dead letter 2: attribute %q = %q, not the original's", k, v)
				}
			}
			dec.Message.Attributes, want.Message.Attributes = nil, nil
		}
		if !sameDeadLetter(dec, want) {
			t.Errorf("dead letter %d decoded\n got %+v\nwant %+v", i, dec, want)
		}
	}
	if e := got["dl-1"]; e != nil && !strings.HasSuffix(e.Attributes[dlq.AttrError], "...") {
		t.Errorf("the megabyte error arrived as %d bytes", len(e.Attributes[dlq.AttrError]))
	}
}

// A missing dead-letter topic fails the pipeline naming it, and dlq.Write
// does not create it.
func TestDeadLetterWriteMissingTopic(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	topic := missingTopic(t, e, "dead-letters-missing")
	p, s := beam.NewPipelineWithRoot()
	dlq.Write(s, dlq.Config{Topic: topic, Connection: pubsubio.Connection{EmulatorEndpoint: e.Endpoint}}, beam.CreateList(s, deadLetterFailures(3)))
	err := beamx.Run(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), topic.String()) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("pipeline with a missing dead-letter topic: %v, want a failure naming %s", err, topic)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Client(t).TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topic.String()}); status.Code(err) != codes.NotFound {
		t.Errorf("GetTopic after the run: %v, want NOT_FOUND: dlq.Write must not create its topic", err)
	}
}

// End to end: a bounded read, the record view with the JSON format, and
// its dead letters published with dlq.Write. Every good message becomes a
// record; every poison message, including ones after good ones in the same
// bundle, arrives on the dead-letter topic with its ID, payload, attributes
// and subscription; nothing is lost and the counts match.
func TestDeadLetterRecordViewToTopic(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	input := e.CreateTopic(t, "records")
	inputSub := e.CreateSubscription(t, input, "records", 30*time.Second)
	dlqTopic := e.CreateTopic(t, "records-dead-letters")
	dlqSub := e.CreateSubscription(t, dlqTopic, "records-dead-letters", 0)

	const n = 60
	client := e.Client(t)
	pub := client.Publisher(input.String())
	defer pub.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	poison := map[string]string{} // payload -> message ID
	var results []*pubsub.PublishResult
	for i := range n {
		data := fmt.Sprintf(`{"i":%d}`, i)
		if i%7 == 3 {
			data = fmt.Sprintf(`{"i":%d`, i) // truncated JSON
		}
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: []byte(data), Attributes: map[string]string{"n": fmt.Sprint(i)}}))
	}
	ids := map[string]string{}
	for i, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("publishing message %d: %v", i, err)
		}
		ids[fmt.Sprint(i)] = id
		if i%7 == 3 {
			poison[fmt.Sprintf(`{"i":%d`, i)] = id
		}
	}

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{inputSub},
		MaxMessages:   n,
		IdleTimeout:   10 * time.Second,
		Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	})
	records, dead := pubsubio.Records(s, pubsubio.RecordConfig{Format: pubsubio.FormatJSON, AttributesKey: "attrs"}, msgs)
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, records)
	dlq.Write(s, dlq.Config{Topic: dlqTopic, Connection: pubsubio.Connection{EmulatorEndpoint: e.Endpoint}}, dead)
	r, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}

	recs, err := collect.ItemsOf[string](bucket)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, rec := range recs {
		var i int
		var id string
		if _, err := fmt.Sscanf(rec, `{"data":{"i":%d},"attrs":`, &i); err != nil {
			t.Fatalf("record %s: %v", rec, err)
		}
		id = ids[fmt.Sprint(i)]
		want := fmt.Sprintf(`{"data":{"i":%d},"attrs":{"n":"%d"},"message_id":"%s","publish_time_millis":`, i, i, id)
		if !strings.HasPrefix(rec, want) || !strings.HasSuffix(rec, "}") {
			t.Errorf("record %s, want it to start with %s", rec, want)
		}
		seen[id] = true
	}
	if want := n - len(poison); len(seen) != want {
		t.Errorf("%d distinct records (%d in all), want %d", len(seen), len(recs), want)
	}

	got := receiveAll(t, client, dlqSub, len(poison), time.Minute)
	for data, id := range poison {
		m := got[data]
		if m == nil {
			t.Errorf("poison message %s (%q) missing from the dead-letter topic", id, data)
			continue
		}
		f := decodeDeadLetter(t, m)
		if f.Stage != dlq.StageDecode || f.Subscription != inputSub || f.Message.ID != id || !maps.Equal(f.Message.Attributes, map[string]string{"n": strings.TrimPrefix(data, `{"i":`)}) ||
			!strings.Contains(f.Error, "not JSON") || !strings.Contains(f.Error, id) || f.Message.PublishTime.IsZero() {
			t.Errorf("dead letter for %s: %+v", id, f)
		}
	}
	if len(got) != len(poison) {
		t.Errorf("%d dead letters arrived, want %d", len(got), len(poison))
	}
	if d, p := counter(r, "record_decode_failures"), counter(r, "dead_letters_published"); d != int64(len(poison)) || p != int64(len(poison)) {
		t.Errorf("record_decode_failures %d, dead_letters_published %d, want %d each", d, p, len(poison))
	}
}
