package source

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.Function2x0(nothing)
	register.Function2x1(sum)
	register.Emitter1[int64]()
}

// whenDone returns a PCollection of a single zero that exists only once
// msgs, a read's output, is complete: the zero is grouped in the global
// window with what the read emits (which adds nothing to it), so the
// grouping fires once the read's watermark reaches its end, when every
// split finished. A split finishes after its last, ack-only bundle (the
// one a drain's TruncateRestriction leaves too), so whatever follows runs
// once every ack was sent. The grouping holds one element, however long
// an unbounded read runs.
func whenDone(s beam.Scope, msgs beam.PCollection) beam.PCollection {
	none := beam.ParDo(s, nothing, msgs)
	return beam.Combine(s, sum, beam.Flatten(s, none, beam.Create(s, int64(0))))
}

// nothing emits nothing for a message: the read's output only holds what
// follows whenDone back until it is complete.
func nothing(model.Message, func(int64)) {}

func sum(a, b int64) int64 { return a + b }
