package sink

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

type deadLetterFn = func(dlq.FailedMessage)

func init() {
	register.DoFn3x1[context.Context, model.Message, deadLetterFn, error](&writeFn{})
	register.Emitter1[dlq.FailedMessage]()
}

// writeFn is the writer DoFn. Its exported field is the configuration Beam
// serializes into the graph; the writer is per-instance runtime state built
// in Setup. A bundle returns only when every message it accepted is
// confirmed, routed by the failure policy, or the bundle fails, which makes
// the runner retry it: at-least-once.
type writeFn struct {
	Cfg Config

	w *writer
}

// Setup builds the instance's one client. Publishers are opened lazily,
// per destination.
func (fn *writeFn) Setup(ctx context.Context) error {
	be, err := newClientBackend(ctx, fn.Cfg)
	if err != nil {
		return err
	}
	fn.w = newWriter(fn.Cfg, be)
	return nil
}

// StartBundle declares the dead-letter emitter because Beam requires the
// bundle methods of a DoFn with emitters to declare the same ones.
func (fn *writeFn) StartBundle(_ context.Context, _ deadLetterFn) {
	fn.w.startBundle()
}

func (fn *writeFn) ProcessElement(ctx context.Context, m model.Message, emit deadLetterFn) error {
	return fn.w.process(ctx, m, emit)
}

func (fn *writeFn) FinishBundle(ctx context.Context, emit deadLetterFn) error {
	return fn.w.finishBundle(ctx, emit)
}

// Teardown releases every publisher (bounded by ShutdownTimeout) and the
// connection.
func (fn *writeFn) Teardown(ctx context.Context) error {
	if fn.w == nil {
		return nil
	}
	return fn.w.close(ctx)
}
