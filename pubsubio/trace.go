package pubsubio

import (
	"context"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
)

// TraceContext returns ctx carrying the trace context m carries in its
// attributes: that of its receive span when ReadConfig.Tracing is on,
// else its publisher's, if the publisher traced. A span user code starts
// from it continues the message's trace. docs/tracing.md, Tracing.
func TraceContext(ctx context.Context, m Message) context.Context {
	return tracing.Extract(ctx, m.Attributes)
}

// WithTraceContext returns m carrying the span context of ctx in its
// attributes (a copy of them), so that a traced Write's publish span, and
// the trace of whoever consumes the message, continue from ctx's span. It
// returns m unchanged when ctx holds no span.
func WithTraceContext(ctx context.Context, m Message) Message {
	m.Attributes = tracing.Inject(ctx, m.Attributes)
	return m
}
