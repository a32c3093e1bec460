package main

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.Function1x0(discard)
}

func discard(int) {}

// endStage gives the stage that produced col an output consumed across a
// stage boundary. Prism (Beam 2.77) waits for a stage without outputs in a
// loop that burns a core (see the stages case, stages.go); on a 2-core
// machine that core is taken from the emulator and the contenders. Every
// pipeline here ends this way, so the prototype and pubsubio run alike.
func endStage(s beam.Scope, col beam.PCollection) {
	beam.ParDo0(s, discard, beam.Reshuffle(s, col))
}
