// Package integration runs pubsubio pipelines end to end on Prism (Beam
// Go's local runner, in-process) against Google's Pub/Sub emulator, started
// once per test binary by the emulator harness, and against pstest where a
// test needs per-message ack counts or fault injection.
package integration

import (
	"flag"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	emulator.Main(m)
}
