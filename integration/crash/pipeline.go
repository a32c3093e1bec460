package crash

import (
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What crashpipeline and the tests agree on. crashpipeline defines the
// same values under the same names and must keep them equal (the crash
// tests fail if they differ). It does not import this package: that would
// link the test harness (the emulator package, testcontainers-go, the
// Docker client, testify) into the pipeline under test and run their init
// functions, testcontainers-go's listing every process on the machine, in
// every pipeline process the tests start and kill.
const (
	// InputIDAttribute carries the input message's ID on the output copy,
	// so a test can match every output to its input.
	InputIDAttribute = "crash.input_id"
	// DoneLine is printed on stdout when the pipeline finished
	// successfully.
	DoneLine = "crashpipeline: pipeline finished"
	// StalledLine is printed on stderr when --stall has blocked the
	// transform.
	StalledLine = "crashpipeline: transform stalled"
)

// PipelinePackage is crashpipeline's import path.
const PipelinePackage = "github.com/pubsubio/beam-pubsubio/integration/crashpipeline"

// Environment variables that scale the crash tests (scripts/reliability
// sets them for the long run; CI uses the defaults).
const (
	EnvMessages    = "PUBSUB_IT_CRASH_MESSAGES"     // input backlog size
	EnvKills       = "PUBSUB_IT_CRASH_KILLS"        // SIGKILLs of the whole process per variant
	EnvSeed        = "PUBSUB_IT_CRASH_SEED"         // replays a run's kill points
	EnvWorkerKills = "PUBSUB_IT_CRASH_WORKER_KILLS" // SIGKILLs of the SDK worker under a standalone Prism
)

// DefaultMessages is the backlog when PUBSUB_IT_CRASH_MESSAGES is unset.
const DefaultMessages = 2000

// EnvInt returns the environment variable name as a non-negative integer,
// or def when it is unset; any other value fails the test.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// Rand returns the run's random source and logs its seed, so a failing
// sequence of kill points can be replayed with PUBSUB_IT_CRASH_SEED.
func Rand(t testing.TB) (*rand.Rand, int64) {
	t.Helper()
	seed := time.Now().UnixNano()
	if v := strings.TrimSpace(os.Getenv(EnvSeed)); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an integer", EnvSeed, v)
		}
	}
	t.Logf("kill points seeded with %d (replay: %s=%d)", seed, EnvSeed, seed)
	return rand.New(rand.NewSource(seed)), seed
}
