package sink

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
)

func init() {
	register.Function2x0(forwardDeadLetter)
}

// deadLetterOutput is what Write returns: the writer's dead letters behind
// a Reshuffle and a pass-through the runner cannot elide, so the writer's
// stage always has an output that crosses a stage boundary, whether or not
// the pipeline consumes the dead letters.
//
// The reason is Prism (Beam 2.77, runners/prism/internal/stage.go): a stage
// with no outputs waits for its bundle in a loop that selects on an
// already-closed channel, burning a core for as long as the bundle runs.
// Measured here: a 5 s bundle with no output cost 4.9 s of CPU, the same
// bundle with a consumed output 0.06 s. The writer's bundles last as long as
// Pub/Sub takes to confirm them, and that core is taken from the publishes.
// An unconsumed Reshuffle alone does not help: Prism drops it. On other
// runners the extra step carries nothing unless messages are routed, and it
// gives routed messages their own commit point.
func deadLetterOutput(s beam.Scope, deadLetters beam.PCollection) beam.PCollection {
	return beam.ParDo(s, forwardDeadLetter, beam.Reshuffle(s, deadLetters))
}

func forwardDeadLetter(m dlq.FailedMessage, emit func(dlq.FailedMessage)) { emit(m) }
