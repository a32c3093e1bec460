package sink

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
)

// Tracing (Config.Tracing). A message's publish span starts when the
// writer accepts it (writer.go, processOne), as a child of the trace
// context the message carries, and the message is published carrying the
// span's context. The span ends with the message's verdict (verdicts.go):
// confirmed, routed by the failure policy, failing the bundle, or set
// aside with a failed bundle; a failed attempt that is republished
// (repair.go) is an event on it.

// errDiscarded ends the publish span of a message set aside with a failed
// bundle: the runner retries the bundle, or fails the job.
var errDiscarded = errors.New("pubsubio.Write: the bundle failed before this message was confirmed")

// endTrace ends o's publish span, failed with err unless err is nil.
func (o *outbound) endTrace(err error) {
	tracing.End(o.span, err)
	o.span = nil
}

// traceFailure records on o's publish span that an attempt failed with
// err; the verdict says whether it is republished or ends the span.
func (o *outbound) traceFailure(err error) {
	if o.span == nil {
		return
	}
	code, _ := grpccode.Of(err)
	o.span.AddEvent("publish failed", trace.WithAttributes(attribute.String("rpc.grpc.status_code", grpccode.Name(code)), attribute.Int("pubsubio.attempt", o.attempts)))
}

// endTraces ends the publish spans of msgs, set aside with a failed
// bundle.
func endTraces(msgs []*outbound) {
	for _, o := range msgs {
		o.endTrace(errDiscarded)
	}
}
