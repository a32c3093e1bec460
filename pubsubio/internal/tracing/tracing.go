// Package tracing carries OpenTelemetry trace context in Pub/Sub message
// attributes the way the Pub/Sub Go client does (trace.go of
// cloud.google.com/go/pubsub/v2): W3C trace context, its keys prefixed
// "googclient_", so that a traced publisher, pubsubio's Read and Write and
// a traced subscriber continue one trace. Spans come from the global
// TracerProvider (otel.SetTracerProvider), as the client's do.
package tracing

import (
	"context"
	"maps"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The attributes trace context travels in: W3C's traceparent and
// tracestate headers under the client's prefix. Pub/Sub refuses other
// keys starting with "goog" (model.AttributeKeyProblem).
const (
	TraceParentAttribute = model.TraceAttributePrefix + "traceparent"
	TraceStateAttribute  = model.TraceAttributePrefix + "tracestate"
)

// ScopeName is the instrumentation scope of pubsubio's spans.
const ScopeName = "github.com/pubsubio/beam-pubsubio/pubsubio"

// Span attributes and events of pubsubio's own.
const (
	// CommitWaitAttribute is how long a read message waited, in
	// milliseconds, between its emission and its ack: the runner's commit.
	CommitWaitAttribute = attribute.Key("pubsubio.commit_wait_ms")
	// ResultAttribute is what became of a read message: acked or nacked,
	// with the client's values.
	ResultAttribute = attribute.Key("messaging.gcp_pubsub.result")
	// GivenBackAttribute says why a read message was given back to Pub/Sub
	// (the counter it is counted in).
	GivenBackAttribute = attribute.Key("pubsubio.given_back")
	// EmittedEvent marks when a read message was emitted downstream.
	EmittedEvent = "emitted"
)

// tracer is pubsubio's tracer of the global TracerProvider as it is now:
// looked up per span, as the client does, so that a provider set later
// (or replaced) takes effect.
func tracer() trace.Tracer { return otel.Tracer(ScopeName) }

var propagator = propagation.TraceContext{}

// carrier is a message's attributes as the propagator sees them.
type carrier map[string]string

func (c carrier) Get(key string) string { return c[model.TraceAttributePrefix+key] }

func (c carrier) Set(key, value string) { c[model.TraceAttributePrefix+key] = value }

func (c carrier) Keys() []string {
	var keys []string
	for k := range c {
		if key, ok := strings.CutPrefix(k, model.TraceAttributePrefix); ok {
			keys = append(keys, key)
		}
	}
	return keys
}

// Extract returns ctx carrying the span context attrs hold, if they hold
// a valid one.
func Extract(ctx context.Context, attrs map[string]string) context.Context {
	if attrs[TraceParentAttribute] == "" {
		return ctx
	}
	return propagator.Extract(ctx, carrier(attrs))
}

// contextSkipped counts the messages that could not carry their trace
// context: it would have taken them over Pub/Sub's model.MaxAttributes.
var contextSkipped = metrics.NewCounter("trace_context_skipped")

// Report reports the tracing counts into Beam metrics with a DoFn call's
// context.
func Report(ctx context.Context) { contextSkipped.Report(ctx) }

// Inject returns attrs carrying ctx's span context, in a copy, since attrs
// may be shared; attrs itself when ctx holds no valid span context. A
// message valid without tracing stays valid with it: where the trace
// context's attributes would take attrs over model.MaxAttributes, the
// trace state goes first, then the whole context (counted as
// trace_context_skipped), and attrs come back as they were.
func Inject(ctx context.Context, attrs map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return attrs
	}
	out := make(map[string]string, len(attrs)+2)
	maps.Copy(out, attrs)
	delete(out, TraceStateAttribute) // the old context's, if the new one has none
	propagator.Inject(ctx, carrier(out))
	if len(out) > model.MaxAttributes {
		delete(out, TraceStateAttribute)
	}
	if len(out) > model.MaxAttributes {
		contextSkipped.Add(1)
		return attrs
	}
	return out
}

// StartReceive starts the receive span of m, read from its subscription,
// as a child of the context its publisher put in its attributes, and
// returns m carrying the span's context instead, for the pipeline to
// continue.
func StartReceive(m model.Message) (model.Message, trace.Span) {
	sub := m.Subscription
	return start(m, sub.ID+" receive", trace.SpanKindConsumer, semconv.MessagingOperationTypeReceive,
		sub.Project, sub.ID, sub.String())
}

// StartPublish starts the publish span of m, sent to topic, as a child of
// the context m carries, and returns m carrying the span's context
// instead, for its consumers to continue.
func StartPublish(m model.Message, topic model.Topic) (model.Message, trace.Span) {
	return start(m, topic.ID+" publish", trace.SpanKindProducer, semconv.MessagingOperationTypePublish,
		topic.Project, topic.ID, topic.String())
}

// start starts a span named name about m and the resource (subscription
// or topic) project/id, full name resource, as a child of the context m
// carries, and returns m carrying the span's context instead.
func start(m model.Message, name string, kind trace.SpanKind, op attribute.KeyValue, project, id, resource string) (model.Message, trace.Span) {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemGCPPubsub,
		semconv.MessagingDestinationName(id),
		attribute.String("gcp.project_id", project),
		attribute.String("gcp.resource.name", resource),
		op,
		semconv.MessagingMessageBodySize(len(m.Data)),
	}
	if m.ID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(m.ID))
	}
	if m.OrderingKey != "" {
		attrs = append(attrs, semconv.MessagingGCPPubsubMessageOrderingKey(m.OrderingKey))
	}
	if m.DeliveryAttempt > 0 {
		attrs = append(attrs, semconv.MessagingGCPPubsubMessageDeliveryAttempt(m.DeliveryAttempt))
	}
	ctx, span := tracer().Start(Extract(context.Background(), m.Attributes), name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	m.Attributes = Inject(ctx, m.Attributes)
	return m, span
}

// End ends span, marking it failed with err unless err is nil; a nil span
// is ignored.
func End(span trace.Span, err error, opts ...trace.SpanEndOption) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(opts...)
}
