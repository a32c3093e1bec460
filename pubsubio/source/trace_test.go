package source

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing/tracingtest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// tracedAttributes are attributes as a traced publisher sends them: the
// context of its span, which it returns.
func tracedAttributes() (map[string]string, trace.SpanContext) {
	ctx, span := otel.Tracer("publisher").Start(context.Background(), "orders create")
	defer span.End()
	return tracing.Inject(ctx, map[string]string{"k": "v"}), span.SpanContext()
}

// With Tracing, each message gets a receive span, the child of its
// publisher's span when it carries one and a new trace otherwise; the
// message carries the receive span's context on; and the span ends when
// the next bundle acks the message, saying so and how long the commit
// took.
func TestTracingReceiveSpans(t *testing.T) {
	rec := tracingtest.Record(t)
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "traced", 1)
	attrs, publisher := tracedAttributes()
	traced := f.publish(t, topic, 3, func(int) map[string]string { return attrs })
	plain := f.publish(t, topic, 1, nil)[0]

	fn := exactlyOnceRead(t, f, subs[0])
	fn.Cfg.Tracing = true
	msgs, rest := readMessagesUntil(t, fn, Restriction{}, 4)
	if got := tracingtest.Named(rec, "traced-sub-0 receive"); len(got) != 0 {
		t.Fatalf("%d receive spans ended before their messages were acked", len(got))
	}
	runTestBundle(t, fn, rest) // acks them

	spans := map[trace.SpanID]bool{}
	for _, s := range tracingtest.Named(rec, "traced-sub-0 receive") {
		spans[s.SpanContext().SpanID()] = true
		id, _ := tracingtest.Attribute(s, "messaging.message.id")
		result, _ := tracingtest.Attribute(s, string(tracing.ResultAttribute))
		_, waited := tracingtest.Attribute(s, string(tracing.CommitWaitAttribute))
		if s.SpanKind() != trace.SpanKindConsumer || result != "acked" || !waited || len(s.Events()) != 1 || s.Events()[0].Name != tracing.EmittedEvent {
			t.Errorf("receive span of %s: kind %v, result %q, commit wait recorded %v, events %v; want a consumer span, acked, with the wait and the emission",
				id, s.SpanKind(), result, waited, s.Events())
		}
		switch parent := s.Parent(); {
		case id == plain && parent.IsValid():
			t.Errorf("receive span of %s, published untraced, has parent %v; want a new trace", id, parent)
		case id != plain && (parent.TraceID() != publisher.TraceID() || parent.SpanID() != publisher.SpanID()):
			t.Errorf("receive span of %s has parent %v, want the publisher's span %v", id, parent, publisher)
		}
	}
	if len(spans) != 4 {
		t.Fatalf("%d receive spans for the 4 messages (%v traced)", len(spans), traced)
	}
	for _, m := range msgs {
		sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), m.Attributes))
		if !spans[sc.SpanID()] || (m.ID != plain && (sc.TraceID() != publisher.TraceID() || m.Attributes["k"] != "v")) {
			t.Errorf("message %s carries %v (attributes %v): want its receive span's context, in its trace, and its own attributes", m.ID, sc, m.Attributes)
		}
	}
}

// Without Tracing nothing is traced and the attributes pass unchanged.
func TestTracingOff(t *testing.T) {
	rec := tracingtest.Record(t)
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "untraced", 1)
	attrs, _ := tracedAttributes()
	f.publish(t, topic, 2, func(int) map[string]string { return attrs })
	fn := exactlyOnceRead(t, f, subs[0])
	msgs, rest := readMessagesUntil(t, fn, Restriction{}, 2)
	runTestBundle(t, fn, rest)
	for _, m := range msgs {
		if m.Attributes[tracing.TraceParentAttribute] != attrs[tracing.TraceParentAttribute] {
			t.Errorf("message %s carries %q, want its publisher's %q", m.ID, m.Attributes[tracing.TraceParentAttribute], attrs[tracing.TraceParentAttribute])
		}
	}
	for _, s := range rec.Ended() {
		if s.InstrumentationScope().Name == tracing.ScopeName {
			t.Errorf("span %q made with Tracing off", s.Name())
		}
	}
}

// A message given back ends its span, saying why.
func TestTracingGivenBack(t *testing.T) {
	rec := tracingtest.Record(t)
	h := newReaderHarness(t, testConfig(t, func(c *Config) { c.Tracing = true }))
	run := h.poll()
	attrs, _ := tracedAttributes()
	m := msg("m0", "data")
	m.Attributes = attrs
	deliverTo(h.r, run, m, &fakeHandle{}, "ack-m0")
	got := drain(h.r, 10, 1)
	if len(got) != 1 {
		t.Fatalf("drained %d, want 1", len(got))
	}
	h.r.abandonBundle(1, got[0])
	spans := tracingtest.Named(rec, model.SubscriptionOf("pubsubio-test", "sub-0").ID+" receive")
	if len(spans) != 1 {
		t.Fatalf("%d receive spans ended, want 1", len(spans))
	}
	result, _ := tracingtest.Attribute(spans[0], string(tracing.ResultAttribute))
	why, _ := tracingtest.Attribute(spans[0], string(tracing.GivenBackAttribute))
	if result != "nacked" || why != counterNames[nackedUncommitted] {
		t.Errorf("receive span of a message its failed bundle gave back: result %q, given back %q; want nacked, %s", result, why, counterNames[nackedUncommitted])
	}
}
