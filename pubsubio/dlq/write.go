package dlq

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// stageFn is the output writeFn declares and never emits: see stageOutput.
type stageFn = func(int)

func init() {
	register.DoFn3x1[context.Context, FailedMessage, stageFn, error](&writeFn{})
	register.Emitter1[int]()
	register.Function1x1(original)
	register.Function2x0(forward)
}

var failedType = reflect.TypeOf(FailedMessage{})

// inputHint says what Write and Originals take.
const inputHint = "pass the dead letters a Write, a ReadWithDeadLetters or a record view returns"

// Write publishes failed, a PCollection<FailedMessage>, to cfg.Topic, one
// envelope per dead letter (see Encode for what it carries). A bundle
// commits only after Pub/Sub confirmed every dead letter of it, so dead
// letters are at-least-once, like the messages they stand for: a retried
// bundle can publish some twice, so consume the topic idempotently (e.g. by
// AttrMessageID). It panics on an invalid configuration; TryWrite returns
// the error.
func Write(s beam.Scope, cfg Config, failed beam.PCollection) {
	if err := TryWrite(s, cfg, failed); err != nil {
		panic(err)
	}
}

// TryWrite is Write returning the construction error instead of panicking.
func TryWrite(s beam.Scope, cfg Config, failed beam.PCollection) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if err := construct.CheckInput("dlq.Write", failed, failedType, "dlq.FailedMessage", inputHint); err != nil {
		return err
	}
	s = s.Scope("dlq.Write")
	out, err := beam.TryParDo(s, &writeFn{Cfg: cfg}, failed)
	if err != nil {
		return fmt.Errorf("dlq.Write: %w", err)
	}
	stageOutput(s, out[0])
	return nil
}

// stageOutput gives the writer's stage an output that crosses a stage
// boundary. Prism (Beam 2.77) waits for a bundle of a stage without
// outputs in a busy loop, and the writer's bundles wait for Pub/Sub at
// MaxInFlightMessages: measured, a 5 s wait burnt 5.0 s of CPU without it
// and about 0.1 s with it (BENCHMARKS.md). An unconsumed Reshuffle alone
// does not help: Prism drops it.
func stageOutput(s beam.Scope, col beam.PCollection) {
	beam.ParDo(s, forward, beam.Reshuffle(s, col))
}

func forward(v int, emit func(int)) { emit(v) }

// Originals returns the original message of each dead letter in failed, a
// PCollection<FailedMessage>, as a PCollection<model.Message> (see
// FailedMessage.Original): what a replay pipeline writes back through the
// sink, or processes again, once the cause is fixed.
func Originals(s beam.Scope, failed beam.PCollection) beam.PCollection {
	if err := construct.CheckInput("dlq.Originals", failed, failedType, "dlq.FailedMessage", inputHint); err != nil {
		panic(err)
	}
	return beam.ParDo(s.Scope("dlq.Originals"), original, failed)
}

func original(f FailedMessage) model.Message { return f.Original() }

// writeFn is Write's DoFn. Its exported field is the configuration Beam
// serializes into the graph; the writer is per-instance runtime state built
// in Setup.
type writeFn struct {
	Cfg Config

	w *writer
}

// Setup builds the instance's client and publisher. Nothing is checked
// against Pub/Sub here: a publisher may lack the right to look a topic up,
// so a missing topic shows as the first publish's NOT_FOUND.
func (fn *writeFn) Setup(ctx context.Context) error {
	w, err := newWriter(ctx, fn.Cfg)
	if err != nil {
		return err
	}
	fn.w = w
	return nil
}

// StartBundle and FinishBundle declare the emitter because Beam requires
// the bundle methods of a DoFn with emitters to declare the same ones.
func (fn *writeFn) StartBundle(stageFn) { fn.w.startBundle() }

func (fn *writeFn) ProcessElement(ctx context.Context, f FailedMessage, _ stageFn) error {
	return fn.w.process(ctx, f)
}

func (fn *writeFn) FinishBundle(ctx context.Context, _ stageFn) error {
	return fn.w.finishBundle(ctx)
}

// Teardown stops the publisher (bounded by ShutdownTimeout) and closes the
// client.
func (fn *writeFn) Teardown(ctx context.Context) error {
	if fn.w == nil {
		return nil
	}
	return fn.w.close(ctx)
}
