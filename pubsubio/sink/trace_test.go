package sink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"go.opentelemetry.io/otel"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing/tracingtest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// readMessage is a message as a traced read emits it: carrying the
// context of its receive span, which it returns.
func readMessage(data string) (model.Message, trace.SpanContext) {
	ctx, span := otel.Tracer("read").Start(context.Background(), "orders-sub receive")
	defer span.End()
	return model.Message{Data: []byte(data), Attributes: tracing.Inject(ctx, map[string]string{"k": "v"})}, span.SpanContext()
}

// publishedContext is the span context the message with payload data was
// published carrying.
func publishedContext(t *testing.T, be *fakeBackend, data string) trace.SpanContext {
	t.Helper()
	for _, p := range be.publishers(validTopic) {
		p.mu.Lock()
		for _, m := range p.delivered {
			if string(m.Data) == data {
				p.mu.Unlock()
				return trace.SpanContextFromContext(tracing.Extract(context.Background(), m.Attributes))
			}
		}
		p.mu.Unlock()
	}
	t.Fatalf("%q was not published", data)
	return trace.SpanContext{}
}

// With Tracing, each message gets a publish span, the child of the context
// it carries (a new trace when it carries none), ended when Pub/Sub
// confirmed it, and is published carrying the span's context.
func TestTracingPublishSpans(t *testing.T) {
	rec := tracingtest.Record(t)
	h := newHarness(t, Config{Tracing: true}, nil)
	traced, receive := readMessage("traced")
	h.mustProcess(traced)
	h.mustProcess(model.Message{Data: []byte("plain")})
	h.mustFinish()

	spans := tracingtest.Named(rec, validTopic.ID+" publish")
	if len(spans) != 2 {
		t.Fatalf("%d publish spans ended, want 2", len(spans))
	}
	for _, s := range spans {
		published := publishedContext(t, h.be, map[bool]string{true: "traced", false: "plain"}[s.Parent().IsValid()])
		if s.SpanKind() != trace.SpanKindProducer || s.Status().Code == otelcodes.Error || published.SpanID() != s.SpanContext().SpanID() {
			t.Errorf("publish span %v: kind %v, status %v, the message published carrying %v; want a producer span, not failed, its context published", s.SpanContext(), s.SpanKind(), s.Status(), published)
		}
		if p := s.Parent(); p.IsValid() && (p.SpanID() != receive.SpanID() || s.SpanContext().TraceID() != receive.TraceID()) {
			t.Errorf("publish span's parent %v, want the receive span %v", p, receive)
		}
	}
}

// A message Pub/Sub refuses, or would (its limits), ends its span failed.
// An empty one, which carries no trace, is refused untraced.
func TestTracingPublishRefused(t *testing.T) {
	rec := tracingtest.Record(t)
	be := newFakeBackend(DefaultCountThreshold)
	be.setVerdict(func(_ model.Topic, batch []*pubsub.Message) error {
		if slices.ContainsFunc(batch, func(m *pubsub.Message) bool { return string(m.Data) == "refused" }) {
			return status.Error(codes.InvalidArgument, "refused")
		}
		return nil
	})
	h := newHarness(t, Config{Tracing: true, FailurePolicy: model.PolicyDeadLetter}, be)
	for _, data := range []string{"fine", "refused", "too long"} {
		m, _ := readMessage(data)
		if data == "too long" {
			m.Attributes["long"] = strings.Repeat("x", model.MaxAttributeValueBytes+1)
		}
		h.mustProcess(m)
	}
	h.mustProcess(model.Message{}) // neither data nor attributes: Pub/Sub's limits refuse it
	h.mustFinish()
	failed := 0
	for _, s := range tracingtest.Named(rec, validTopic.ID+" publish") {
		if s.Status().Code == otelcodes.Error {
			failed++
		}
	}
	if len(h.dead) != 3 || failed != 2 {
		t.Errorf("%d dead letters, %d failed publish spans; want 3, and 2 failed (the empty one carries no trace)", len(h.dead), failed)
	}
}

// A message at Pub/Sub's limit of attributes, valid without tracing, is
// published with tracing too, without a trace context: it has no room for
// one.
func TestTracingAtTheAttributeLimit(t *testing.T) {
	tracingtest.Record(t)
	h := newHarness(t, Config{Tracing: true, FailurePolicy: model.PolicyDeadLetter}, nil)
	m := model.Message{Data: []byte("full"), Attributes: map[string]string{}}
	for i := range model.MaxAttributes {
		m.Attributes[fmt.Sprintf("k%03d", i)] = "v"
	}
	h.mustProcess(m)
	h.mustFinish()
	if len(h.dead) != 0 {
		t.Errorf("%d dead letters, want 0: %v", len(h.dead), h.dead)
	}
	if sc := publishedContext(t, h.be, "full"); sc.IsValid() {
		t.Errorf("published carrying the trace context %v; want none", sc)
	}
}

// Without Tracing nothing is traced, and the trace context a message
// carries is published as it is.
func TestTracingOffPassesContextThrough(t *testing.T) {
	rec := tracingtest.Record(t)
	h := newHarness(t, Config{}, nil)
	m, receive := readMessage("passed")
	h.mustProcess(m)
	h.mustFinish()
	if got := publishedContext(t, h.be, "passed"); got.SpanID() != receive.SpanID() {
		t.Errorf("published carrying %v, want the context it came with %v", got, receive)
	}
	if len(h.dead) != 0 {
		t.Errorf("dead letters %v: the trace context keys are ones Pub/Sub takes", h.dead)
	}
	for _, s := range rec.Ended() {
		if s.InstrumentationScope().Name == tracing.ScopeName {
			t.Errorf("span %q made with Tracing off", s.Name())
		}
	}
}
