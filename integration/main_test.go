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

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

// parallel is how many tests run at once unless -parallel says: they
// mostly wait (for redeliveries, leases, checkpoints), each on topics and
// subscriptions of its own and, on Flink, with a job server of its own. A
// test that changes process-wide state runs in a process of its own
// (isolated).
const parallel = 8

// TestMain runs the package's tests, but none under -short: the edit
// loop's tier is the library's own tests.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration: end-to-end tests skipped under -short")
		os.Exit(0)
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", fmt.Sprint(parallel)); err != nil {
			panic(err)
		}
	}
	beam.Init()
	reapDisconnectedJobs()
	code := emulator.Run(m)
	if err := crash.RemoveBuilds(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: removing the test binaries: %v\n", err)
	}
	os.Exit(code)
}
