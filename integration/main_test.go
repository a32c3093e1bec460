// Package integration runs pubsubio pipelines end to end on Prism (Beam
// Go's local runner, in-process) against Google's Pub/Sub emulator, started
// once per test binary by the emulator harness, and against pstest where a
// test needs per-message ack counts or fault injection.
package integration

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

// TestMain runs the package's tests, but none under -short: the edit
// loop's tier is the library's own tests, and these take half an hour.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration: end-to-end tests skipped under -short")
		os.Exit(0)
	}
	beam.Init()
	emulator.Main(m)
}
