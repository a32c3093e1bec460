package sink

import (
	"context"
	"errors"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// deadLetterFn emits a dead letter at the event time of the message that
// failed: emitted from FinishBundle it lands in the global window, and
// Write windows the dead letters like its input again (write.go).
type deadLetterFn = func(beam.EventTime, dlq.FailedMessage)

func init() {
	register.DoFn4x1[context.Context, beam.EventTime, model.Message, deadLetterFn, error](&writeFn{})
	register.Emitter2[beam.EventTime, dlq.FailedMessage]()
}

// writeFn is the writer DoFn. Its exported field is the configuration Beam
// serializes into the graph; the writer is per-instance runtime state built
// in Setup. A bundle returns only when every message it accepted is
// confirmed, routed by the failure policy, or the bundle fails.
type writeFn struct {
	Cfg Config

	w *writer
}

// Setup builds the instance's one client. Publishers are opened lazily,
// per destination.
func (fn *writeFn) Setup(ctx context.Context) error {
	be, err := newBackend(ctx, fn.Cfg)
	if err != nil {
		return err
	}
	fn.w = newWriter(fn.Cfg, be)
	return nil
}

// StartBundle declares the dead-letter emitter because Beam requires the
// bundle methods of a DoFn with emitters to declare the same ones. After a
// failed bundle the writer was released (releaseAfterFailure), so an
// instance used again starts on a new client.
func (fn *writeFn) StartBundle(ctx context.Context, _ deadLetterFn) error {
	if fn.w == nil {
		if err := fn.Setup(ctx); err != nil {
			return err
		}
	}
	fn.w.startBundle()
	return nil
}

func (fn *writeFn) ProcessElement(ctx context.Context, et beam.EventTime, m model.Message, emit deadLetterFn) error {
	if fn.w == nil {
		return errReleased
	}
	err := fn.w.process(ctx, et.ToTime(), m)
	fn.emitDeadLetters(emit)
	return fn.releaseAfterFailure(ctx, err)
}

func (fn *writeFn) FinishBundle(ctx context.Context, emit deadLetterFn) error {
	if fn.w == nil {
		return errReleased
	}
	err := fn.w.finishBundle(ctx)
	fn.emitDeadLetters(emit)
	return fn.releaseAfterFailure(ctx, err)
}

// Teardown releases every publisher (bounded by ShutdownTimeout) and the
// connection.
func (fn *writeFn) Teardown(ctx context.Context) error {
	if fn.w == nil {
		return nil
	}
	w := fn.w
	fn.w = nil
	return w.shutdown(ctx, "teardown")
}

func (fn *writeFn) emitDeadLetters(emit deadLetterFn) {
	for _, d := range fn.w.takeDeadLetters() {
		emit(mtime.FromTime(d.eventTime), d.failed)
	}
}

var errReleased = errors.New("pubsubio.Write: the writer was released after its bundle failed and no StartBundle followed; this is a bug in the runner or in pubsubio")

// releaseAfterFailure releases the writer when a bundle fails, and returns
// err.
//
// Beam Go's harness never reuses the execution plan of a failed bundle and
// never tears it down either: Teardown never runs for this instance.
// Without this, every failed bundle would leave a client connection, its
// publishers and whatever they hold behind. The release is Teardown's and
// runs in the background, so the failure reaches the runner at once.
func (fn *writeFn) releaseAfterFailure(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	w := fn.w
	fn.w = nil
	go w.shutdown(context.WithoutCancel(ctx), "after a failed bundle")
	return err
}
