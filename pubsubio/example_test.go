package pubsubio_test

import (
	"context"
	"fmt"
	"strings"

	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

func init() {
	register.Function2x1(checkOrder)
	register.Function1x0(printPayload)
	register.Function1x0(printDeadLetter)
	register.Function1x0(printRecord)
	register.Function1x1(toUpper)
	register.Function1x1(customerOf)
	register.Function3x0(printWindowCount)
}

func printPayload(m pubsubio.Message) { fmt.Println(string(m.Data)) }

func printDeadLetter(f pubsubio.FailedMessage) {
	fmt.Printf("dead letter: %q, stage %s\n", f.Message.Data, f.Stage)
}

func printRecord(r string) { fmt.Println(r) }

func customerOf(m pubsubio.Message) string { return m.Attributes["customer"] }

func printWindowCount(w beam.Window, customer string, n int) {
	fmt.Printf("%s from %s: %d\n", customer, w.(window.IntervalWindow).Start.ToTime().UTC().Format("15:04"), n)
}

// checkOrder is user code that continues each message's trace with a span
// of its own, which the message then carries on to Write.
func checkOrder(ctx context.Context, m pubsubio.Message) pubsubio.Message {
	ctx, span := otel.Tracer("orders").Start(pubsubio.TraceContext(ctx, m), "check order")
	defer span.End()
	m.Data = []byte(strings.ToUpper(string(m.Data)))
	return pubsubio.WithTraceContext(ctx, m)
}

func toUpper(m pubsubio.Message) pubsubio.Message {
	m.Data = []byte(strings.ToUpper(string(m.Data)))
	m.Attributes = map[string]string{"from": m.ID}
	return m
}

// Read a subscription and print every message; each is acked once the
// runner has committed the bundle that emitted it.
func ExampleRead() {
	pubsub := startFakePubSub("apple", "banana", "cherry") // stands in for Pub/Sub
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-sub")},
		MaxMessages:   3, // a bounded read, so that the example ends
		Connection:    pubsub.connection(),
	})
	beam.ParDo0(s, printPayload, msgs)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	pubsub.printAcked()
	// Unordered output:
	// apple
	// banana
	// cherry
	// acked: 3
}

// Read and Write: every message read is published to another topic, which
// Write creates when it is missing. A read message is acked only after the
// bundle that published it committed.
func ExampleWrite() {
	pubsub := startFakePubSub("apple", "banana")
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-sub")},
		MaxMessages:   2,
		Connection:    pubsub.connection(),
	})
	pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:      pubsubio.TopicOf("my-project", "shouted"),
		Connection: pubsub.connection(),
	}, beam.ParDo(s, toUpper, msgs))
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	pubsub.printTopic("shouted", "from")
	// Output:
	// "APPLE" (from=m0)
	// "BANANA" (from=m1)
}

// A read that checks its payloads are JSON, and returns those that are
// not as dead letters instead of failing.
func ExampleReadWithDeadLetters() {
	pubsub := startFakePubSub(`{"id": 1}`, "not json", `{"id": 2}`)
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs, deadLetters := pubsubio.ReadWithDeadLetters(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-sub")},
		Format:        pubsubio.FormatJSON,
		DecodePolicy:  pubsubio.DecodeDeadLetter,
		MaxMessages:   3,
		Connection:    pubsub.connection(),
	})
	beam.ParDo0(s, printPayload, msgs)
	beam.ParDo0(s, printDeadLetter, deadLetters)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// {"id": 1}
	// {"id": 2}
	// dead letter: "not json", stage decode
}

// Counts per customer in one-minute windows of the event time each
// message carries in an attribute. A message that arrives behind the
// watermark the read already reported is late: under LateDeadLetter it
// goes to the dead letters (stage late) instead of reaching a window that
// may have fired without it, and the windows allow 30 minutes of lateness
// for what still reaches them. (Nothing here arrives late.)
func ExampleReadWithDeadLetters_late() {
	pubsub := newFakePubSub()
	defer pubsub.close()
	for i, at := range []string{"2026-12-02T10:00:05Z", "2026-12-02T10:00:40Z", "2026-12-02T10:01:10Z"} {
		pubsub.srv.Publish("projects/my-project/topics/orders", []byte(fmt.Sprint("order ", i)),
			map[string]string{"customer": "ada", "event_time": at})
	}

	p, s := beam.NewPipelineWithRoot()
	msgs, late := pubsubio.ReadWithDeadLetters(s, pubsubio.ReadConfig{
		Subscriptions:      []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-sub")},
		TimestampAttribute: "event_time",
		LatePolicy:         pubsubio.LateDeadLetter,
		MaxMessages:        3,
		Connection:         pubsub.connection(),
	})
	windowed := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, customerOf, msgs),
		beam.AllowedLateness(30*time.Minute))
	beam.ParDo0(s, printWindowCount, stats.Count(s, windowed))
	beam.ParDo0(s, printDeadLetter, late)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// ada from 10:00: 2
	// ada from 10:01: 1
}

// Records turns messages into one-line JSON records; a payload that is not
// JSON is returned as a dead letter.
func ExampleRecords() {
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s,
		pubsubio.Message{ID: "1", Data: []byte(`{"n": 1}`), Attributes: map[string]string{"type": "order"}},
		pubsubio.Message{ID: "2", Data: []byte(`{"n": `)})
	records, deadLetters := pubsubio.Records(s, pubsubio.RecordConfig{Format: pubsubio.FormatJSON}, msgs)
	beam.ParDo0(s, printRecord, records)
	beam.ParDo0(s, printDeadLetter, deadLetters)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// {"data":{"n":1},"__attributes":{"type":"order"},"message_id":"1"}
	// dead letter: "{\"n\": ", stage decode
}

// What Pub/Sub will not take goes to a dead-letter topic, as an envelope
// that says why (package dlq): here a message with neither data nor
// attributes, which Pub/Sub refuses.
func ExampleWriteDeadLetters() {
	pubsub := startFakePubSub()
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s, pubsubio.Message{Data: []byte("fine")}, pubsubio.Message{})
	deadLetters := pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:         pubsubio.TopicOf("my-project", "orders"),
		FailurePolicy: pubsubio.PolicyDeadLetter,
		Connection:    pubsub.connection(),
	}, msgs)
	pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{
		Topic:      pubsubio.TopicOf("my-project", "dead-letters"), // must exist
		Connection: pubsub.connection(),
	}, deadLetters)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	pubsub.printTopic("orders", "")
	pubsub.printTopic("dead-letters", "dlq.stage")
	// Output:
	// "fine"
	// "" (dlq.stage=validate)
}

// Read a subscription with exactly-once delivery: each message is acked
// once the runner committed the bundle that emitted it, and Pub/Sub
// confirms the ack, after which it never delivers the message again. The
// pipeline's counters say how many acks were confirmed (acks_confirmed)
// and refused (acks_failed_INVALID_ARGUMENT and others: a refused ack is a
// redelivery to come, not a loss).
func ExampleRead_exactlyOnce() {
	pubsub := newFakePubSub()
	defer pubsub.close()
	pubsub.exactlyOnceSubscription("orders-once", "apple", "banana", "cherry")

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-once")},
		MaxMessages:   3,
		Connection:    pubsub.connection(),
	})
	beam.ParDo0(s, printPayload, msgs)
	res, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		fmt.Println(err)
		return
	}
	printCounter(res, "acks_confirmed")
	// Unordered output:
	// apple
	// banana
	// cherry
	// acks_confirmed: 3
}

// Trace messages through a pipeline. With Tracing on, Read gives each
// message a receive span, a child of its publisher's span when the
// publisher traced (the Pub/Sub client does with
// EnableOpenTelemetryTracing), and Write gives it a publish span and
// publishes it carrying that span's context, so the trace goes on at its
// consumer. In between, user code continues it with TraceContext, and
// hands its own span on with WithTraceContext. Spans go to the global
// TracerProvider; here a recorder stands in for an exporter.
func ExampleTraceContext() {
	spans := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	pubsub := startFakePubSub("apple")
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-sub")},
		MaxMessages:   1,
		Tracing:       true,
		Connection:    pubsub.connection(),
	})
	pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:      pubsubio.TopicOf("my-project", "checked"),
		Tracing:    true,
		Connection: pubsub.connection(),
	}, beam.ParDo(s, checkOrder, msgs))
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	// The published message's span and its parents, in one trace.
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range spans.Ended() {
		byID[sp.SpanContext().SpanID()] = sp
	}
	for _, sp := range spans.Ended() {
		if sp.Name() == "checked publish" {
			for ; sp != nil; sp = byID[sp.Parent().SpanID()] {
				fmt.Println(sp.Name())
			}
		}
	}
	// Output:
	// checked publish
	// check order
	// orders-sub receive
}
