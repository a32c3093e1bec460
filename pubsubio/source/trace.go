package source

import (
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
)

// Tracing (Config.Tracing). A message's receive span starts when the
// client hands it over (intake.go, newDelivery), as a child of the trace
// context its publisher put in its attributes, and the message carries
// the span's context on downstream. It ends when the message leaves its
// split (acklifecycle.go, ledger.end): acked, with when it was emitted
// and how long it waited for the runner's commit (for an exactly-once
// ack, once Pub/Sub answered, exactlyonce.go), or given back, with the
// counter that says why.

// traceAcked ends span, that of a message emitted at emitted and acked at
// now; err is why an exactly-once ack was not confirmed. A nil span is
// ignored.
func traceAcked(span trace.Span, emitted, now time.Time, err error) {
	if span == nil {
		return
	}
	span.AddEvent(tracing.EmittedEvent, trace.WithTimestamp(emitted))
	span.SetAttributes(tracing.CommitWaitAttribute.Int64(now.Sub(emitted).Milliseconds()), tracing.ResultAttribute.String("acked"))
	tracing.End(span, err)
}

// traceGivenBack ends d's receive span: d was given back for reason.
func traceGivenBack(d *delivery, reason counter) {
	if d.span == nil {
		return
	}
	if !d.drained.IsZero() {
		d.span.AddEvent(tracing.EmittedEvent, trace.WithTimestamp(d.drained))
	}
	d.span.SetAttributes(tracing.ResultAttribute.String("nacked"), tracing.GivenBackAttribute.String(counterNames[reason]))
	tracing.End(d.span, nil)
}
