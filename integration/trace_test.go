package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// One trace across a pipeline, on Prism against the emulator: a publisher
// with the client's tracing on, Read -> ParDo -> Write with Tracing, and a
// subscriber with the client's tracing on. Prism runs the pipeline in this
// process, so every span lands in the test's recorder.

func init() {
	register.Function1x1(shoutKeepingAttributes)
}

// shoutKeepingAttributes upper-cases the payload and keeps the attributes,
// and with them the trace context the message carries.
func shoutKeepingAttributes(m pubsubio.Message) pubsubio.Message {
	return pubsubio.Message{Data: []byte(strings.ToUpper(string(m.Data))), Attributes: m.Attributes}
}

// recordSpans makes the global TracerProvider record every span until the
// test ends.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

// tracedClient is a client of the emulator with the client's own tracing
// on.
func tracedClient(t *testing.T, e *emulator.Emulator) *pubsub.Client {
	t.Helper()
	conn, err := grpc.NewClient(e.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := pubsub.NewClientWithConfig(context.Background(), e.Project, &pubsub.ClientConfig{EnableOpenTelemetryTracing: true},
		option.WithGRPCConn(conn), option.WithoutAuthentication(), option.WithTelemetryDisabled())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); conn.Close() })
	return c
}

// The subscriber's span of each message has the publisher's trace ID, and
// its chain of parents is the Write's publish span, then the Read's
// receive span, then the publisher's own span.
func TestTracingAcrossThePipeline(t *testing.T) {
	if isolated(t) {
		return
	}
	const n = 20
	e := emulator.Require(t)
	rec := recordSpans(t)
	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	in, out := e.CreateTopic(t, "traced-in"), e.CreateTopic(t, "traced-out")
	inSub := e.CreateSubscription(t, in, "traced-in", 0)
	outSub := e.CreateSubscription(t, out, "traced-out", 0)

	client := tracedClient(t, e)
	publisher := client.Publisher(in.String())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range n {
		if _, err := publisher.Publish(ctx, &pubsub.Message{Data: fmt.Appendf(nil, "message %d", i)}).Get(ctx); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	publisher.Stop()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{inSub}, MaxMessages: n, Tracing: true, Connection: conn})
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, Tracing: true, Connection: conn}, beam.ParDo(s, shoutKeepingAttributes, msgs))
	r := runInBackground(p, 3*time.Minute)
	r.wait(t, 3*time.Minute)
	if r.err != nil {
		t.Fatalf("pipeline failed: %v", r.err)
	}
	receive(t, client, outSub, n, time.Minute)

	// The client ends a subscribe span once its ack was sent.
	subscribe := outSub.ID + " subscribe"
	deadline := time.Now().Add(time.Minute)
	for len(spansNamed(rec, subscribe)) < n && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		byID[sp.SpanContext().SpanID()] = sp
	}
	chains := map[string]int{}
	for _, sp := range spansNamed(rec, subscribe) {
		chain := []string{sp.Name()}
		for at := sp; at.Parent().IsValid(); {
			parent, ok := byID[at.Parent().SpanID()]
			if !ok {
				chain = append(chain, "(unrecorded parent)")
				break
			}
			if parent.SpanContext().TraceID() != sp.SpanContext().TraceID() {
				chain = append(chain, "(another trace)")
				break
			}
			chain = append(chain, parent.Name())
			at = parent
		}
		chains[strings.Join(chain, " <- ")]++
	}
	want := strings.Join([]string{subscribe, out.ID + " publish", inSub.ID + " receive", in.ID + " create"}, " <- ")
	if chains[want] != n {
		t.Errorf("chains of parents of the subscriber's spans: %v; want %d of %q", chains, n, want)
	}
	t.Logf("span chains seen: %v", chains)
}

// spansNamed returns rec's ended spans named name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

// Without Tracing, messages of a traced publisher pass through Read and
// Write with their trace context as it was: Write takes the keys, so
// nothing is dead-lettered, and the consumer sees the publisher's context.
// (The emulator takes any attribute key; Write's own check is what this
// exercises.)
func TestTraceContextPassesThrough(t *testing.T) {
	if isolated(t) {
		return
	}
	const n = 5
	e := emulator.Require(t)
	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	in, out := e.CreateTopic(t, "passthrough-in"), e.CreateTopic(t, "passthrough-out")
	inSub := e.CreateSubscription(t, in, "passthrough-in", 0)
	outSub := e.CreateSubscription(t, out, "passthrough-out", 0)
	recordSpans(t)
	client := tracedClient(t, e)
	publisher := client.Publisher(in.String())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent := map[string]string{} // payload -> traceparent
	for i := range n {
		m := &pubsub.Message{Data: fmt.Appendf(nil, "message %d", i)}
		if _, err := publisher.Publish(ctx, m).Get(ctx); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		sent[strings.ToUpper(string(m.Data))] = m.Attributes["googclient_traceparent"]
	}
	publisher.Stop()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{inSub}, MaxMessages: n, Connection: conn})
	dead := pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, FailurePolicy: pubsubio.PolicyDeadLetter, Connection: conn},
		beam.ParDo(s, shoutKeepingAttributes, msgs))
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, beam.ParDo(s, deadLetterKey, dead))
	r := runInBackground(p, 3*time.Minute)
	r.wait(t, 3*time.Minute)
	if r.err != nil {
		t.Fatalf("pipeline failed: %v", r.err)
	}
	if got := tally(t, bucket); len(got) != 0 {
		t.Errorf("dead letters %v: Write refused the trace context keys", got)
	}
	for payload, m := range receiveAll(t, e.Client(t), outSub, n, time.Minute) {
		if want := sent[payload]; want == "" || m.Attributes["googclient_traceparent"] != want {
			t.Errorf("%q arrived with googclient_traceparent %q, want the publisher's %q", payload, m.Attributes["googclient_traceparent"], want)
		}
	}
}
