package sink

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/rewindow"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.Function1x1(bytesToMessage)
	register.Function1x1(stringToMessage)
	register.Function2x0(forwardDeadLetter)
}

var messageType = reflect.TypeOf(model.Message{})

// Write publishes msgs, a PCollection<model.Message>, and returns the dead
// letters, a PCollection<dlq.FailedMessage> that holds something only
// under PolicyDeadLetter. It panics on an invalid configuration; TryWrite
// returns the error.
func Write(s beam.Scope, cfg Config, msgs beam.PCollection) beam.PCollection {
	out, err := TryWrite(s, cfg, msgs)
	if err != nil {
		panic(err)
	}
	return out
}

// TryWrite is Write returning the construction error instead of panicking.
func TryWrite(s beam.Scope, cfg Config, msgs beam.PCollection) (beam.PCollection, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return beam.PCollection{}, err
	}
	if err := construct.CheckInput("pubsubio.Write", msgs, messageType, "pubsubio.Message",
		"convert it with MessagesFromBytes or MessagesFromStrings, or a ParDo of your own"); err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("pubsubio.Write")
	// The writer emits a dead letter when its verdict arrives, often in
	// FinishBundle, where Beam Go puts what is emitted in the global
	// window: its input is in the global window too (timestamps kept),
	// and its dead letters are windowed like msgs again after it.
	msgs, ws := rewindow.Global(s, msgs)
	out, err := beam.TryParDo(s, &writeFn{Cfg: cfg}, msgs)
	if err != nil {
		return beam.PCollection{}, fmt.Errorf("pubsubio.Write: %w", err)
	}
	return deadLetterOutput(s, out[0], ws), nil
}

// deadLetterOutput is what Write returns: the writer's dead letters behind
// a Reshuffle and a pass-through the runner cannot elide, so the writer's
// stage always has an output that crosses a stage boundary, whether or not
// the pipeline consumes the dead letters; and windowed as the input was
// (ws): each is at its failed message's event time, which the input's
// window function maps back to the message's own window.
//
// The reason is Prism (Beam 2.77): a stage with no outputs waits for its
// bundle in a busy loop, burning a core for as long as the bundle runs
// (docs/limits.md, Known limits), and the writer's bundles last as long as Pub/Sub
// takes to confirm them. An unconsumed Reshuffle alone does not help: Prism
// drops it. On other runners the extra step carries nothing unless
// messages are routed, and it gives routed messages their own commit point.
func deadLetterOutput(s beam.Scope, deadLetters beam.PCollection, ws *window.WindowingStrategy) beam.PCollection {
	return rewindow.Restore(s, beam.ParDo(s, forwardDeadLetter, beam.Reshuffle(s, deadLetters)), ws)
}

func forwardDeadLetter(m dlq.FailedMessage, emit func(dlq.FailedMessage)) { emit(m) }

func bytesToMessage(b []byte) model.Message  { return model.Message{Data: b} }
func stringToMessage(s string) model.Message { return model.Message{Data: []byte(s)} }

// MessagesFromBytes turns a PCollection<[]byte> into a
// PCollection<model.Message> with each element as the payload, for the
// default topic.
func MessagesFromBytes(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("pubsubio.MessagesFromBytes"), bytesToMessage, col)
}

// MessagesFromStrings turns a PCollection<string> into a
// PCollection<model.Message> with each element, UTF-8 encoded, as the
// payload, for the default topic.
func MessagesFromStrings(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("pubsubio.MessagesFromStrings"), stringToMessage, col)
}
