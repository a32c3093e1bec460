package emulator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// Environment variables understood by this package.
const (
	// EnvEndpoint names an already running emulator (host:port) to use
	// instead of starting one. It is never stopped by this package.
	EnvEndpoint = "PUBSUB_IT_EMULATOR"
	// EnvBinary overrides the path of the cloud-pubsub-emulator launcher.
	EnvBinary = "PUBSUB_EMULATOR_BIN"
	// EnvRequire, when set to a true value ("1", "true"), turns Require's
	// skip into a failure so CI cannot silently pass without an emulator.
	EnvRequire = "PUBSUB_IT_REQUIRE"
)

// Project is the project id every emulator in this package is used with.
// The emulator accepts any project; a fixed one keeps names predictable.
const Project = "pubsubio-it"

// Kind says where an Emulator came from.
type Kind string

// The kinds of emulator this package can provide.
const (
	KindExternal  Kind = "external"  // PUBSUB_IT_EMULATOR; not owned, never stopped
	KindProcess   Kind = "process"   // cloud-pubsub-emulator child process
	KindContainer Kind = "container" // testcontainers-go
)

// Timeouts. The Java emulator is ready in about 2 s on an idle machine; the
// generous bounds leave room for a loaded 2-core CI box running several
// test binaries at once.
const (
	startTimeout    = 90 * time.Second // whole acquisition, including a container pull
	readyTimeout    = 60 * time.Second // a started process to answer ListTopics
	externalTimeout = 15 * time.Second // an already-running emulator to answer
	adminTimeout    = 30 * time.Second // one admin RPC (create/delete topic...)
)

// ErrUnavailable is wrapped by errors that mean "no emulator can be provided
// on this machine" (as opposed to "one was found but failed to start").
var ErrUnavailable = errors.New("pubsub emulator unavailable")

// unavailableHelp names the three ways to provide an emulator.
const unavailableHelp = "provide one of:\n" +
	"  1. an already running emulator: " + EnvEndpoint + "=host:port (e.g. `scripts/emulator start 8085`),\n" +
	"  2. the gcloud emulator binary: `gcloud components install pubsub-emulator` (or apt package google-cloud-cli-pubsub-emulator), " +
	"found via " + EnvBinary + "=/path/to/cloud-pubsub-emulator, $PATH, or the Cloud SDK next to gcloud,\n" +
	"  3. a reachable Docker engine holding the image " + ContainerImage + " (or " + EnvImage + "), built by scripts/emulator-image.sh,\n" +
	"     so testcontainers-go can run it"

// Emulator is a reachable Pub/Sub emulator. Endpoint and Project are fixed
// for its lifetime (Restart keeps the endpoint).
type Emulator struct {
	Endpoint string // host:port, plaintext gRPC
	Project  string // project id to use, see Project
	Kind     Kind

	mu        sync.Mutex
	proc      *process         // KindProcess: the running child, nil once stopped
	bin       string           // KindProcess: launcher, for Restart
	stopFn    func() error     // KindContainer: terminates the container
	stopped   bool             // Stop was called (and no Restart since)
	admin     *pubsub.Client   // shared client for fixtures, lazily created
	adminConn *grpc.ClientConn // its connection
	adminErr  error            // why admin could not be created
}

// PID returns the process id (also its process group id) of a KindProcess
// emulator, or 0 when it is not running or not a local process.
func (e *Emulator) PID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc == nil {
		return 0
	}
	return e.proc.PID
}

// Output returns the emulator's captured stdout/stderr (the tail, at most
// 64 KiB) for KindProcess emulators, and "" otherwise. Useful in failure
// messages.
func (e *Emulator) Output() string {
	e.mu.Lock()
	p := e.proc
	e.mu.Unlock()
	if p == nil {
		return ""
	}
	return p.Output(64 << 10)
}

// Stop releases the emulator: a child process is killed by its process
// group and reaped and its temp dir removed; a container or pstest server
// is closed; an external emulator is left running. Stop is idempotent.
func (e *Emulator) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	e.closeAdminLocked()
	switch {
	case e.proc != nil:
		err := e.proc.stop()
		e.proc = nil
		return err
	case e.stopFn != nil:
		return e.stopFn()
	}
	return nil
}

// Restart kills a KindProcess emulator and starts a fresh one on the same
// endpoint, waiting until it answers. All topics and subscriptions are lost
// (the emulator keeps state in memory only). It lets tests exercise a
// connector's reconnect path against a real outage. It also works after
// Stop.
func (e *Emulator) Restart(ctx context.Context) error {
	if e.Kind != KindProcess {
		return fmt.Errorf("emulator: Restart needs an emulator from Start (kind %q at %s is not ours to restart)", e.Kind, e.Endpoint)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closeAdminLocked()
	if e.proc != nil {
		if err := e.proc.stop(); err != nil {
			return fmt.Errorf("emulator: restart: %w", err)
		}
		e.proc = nil
	}
	ctx, cancel := withDefaultTimeout(ctx, readyTimeout)
	defer cancel()
	p, err := startProcess(ctx, e.bin, e.Endpoint)
	if err != nil {
		return fmt.Errorf("emulator: restart on %s: %w", e.Endpoint, err)
	}
	e.proc = p
	e.stopped = false
	return nil
}

// Client returns a Pub/Sub v2 client bound to this emulator through an
// explicit plaintext gRPC connection (PUBSUB_EMULATOR_HOST plays no part).
// It is closed when the test finishes.
func (e *Emulator) Client(t testing.TB) *pubsub.Client {
	t.Helper()
	c, conn, err := e.newClient(context.Background())
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Logf("emulator: closing pubsub client for %s: %v", e.Endpoint, err)
		}
		_ = conn.Close() // already closed by c.Close; harmless
	})
	return c
}

func (e *Emulator) newClient(ctx context.Context) (*pubsub.Client, *grpc.ClientConn, error) {
	conn, err := dial(e.Endpoint)
	if err != nil {
		return nil, nil, err
	}
	c, err := pubsub.NewClient(ctx, e.Project,
		option.WithGRPCConn(conn),
		option.WithoutAuthentication(),
		option.WithTelemetryDisabled(),
	)
	if err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("create pubsub client for emulator %s: %w", e.Endpoint, err)
	}
	return c, conn, nil
}

// adminClient returns the shared client used by fixtures.
func (e *Emulator) adminClient() (*pubsub.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil, fmt.Errorf("emulator at %s was stopped; Restart it or use another", e.Endpoint)
	}
	if e.admin == nil && e.adminErr == nil {
		e.admin, e.adminConn, e.adminErr = e.newClient(context.Background())
	}
	return e.admin, e.adminErr
}

func (e *Emulator) closeAdminLocked() {
	if e.admin != nil {
		_ = e.admin.Close()
		_ = e.adminConn.Close()
	}
	e.admin, e.adminConn, e.adminErr = nil, nil, nil
}

// dial makes a lazily-connecting plaintext connection to endpoint. Short
// reconnect backoff keeps readiness polling and post-restart recovery fast.
func dial(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  50 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   time.Second,
			},
			MinConnectTimeout: 2 * time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("dial emulator %q (want host:port): %w", endpoint, err)
	}
	return conn, nil
}

// waitReady polls a cheap RPC (ListTopics) until it succeeds, ctx expires,
// exited is closed (the emulator process died), or check (if non-nil)
// reports a fatal condition. The error reports the number of attempts and
// the last RPC error.
func waitReady(ctx context.Context, endpoint, project string, exited <-chan struct{}, check func() error) error {
	conn, err := dial(endpoint)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pubsubpb.NewPublisherClient(conn)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := client.ListTopics(actx, &pubsubpb.ListTopicsRequest{Project: "projects/" + project, PageSize: 1})
		cancel()
		if err == nil {
			return nil
		}
		if check != nil {
			if cerr := check(); cerr != nil {
				return fmt.Errorf("emulator at %s cannot become ready (after %d ListTopics attempts, last error: %v): %w", endpoint, attempt, err, cerr)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("emulator at %s not ready after %v (%d ListTopics attempts), last error: %w",
				endpoint, time.Since(start).Round(time.Millisecond), attempt, err)
		case <-exited:
			return fmt.Errorf("emulator at %s exited before becoming ready (after %d ListTopics attempts, last error: %v)", endpoint, attempt, err)
		case <-tick.C:
		}
	}
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// acquire finds an emulator in the order documented in the package doc.
func acquire(ctx context.Context) (*Emulator, error) {
	if ep := strings.TrimSpace(os.Getenv(EnvEndpoint)); ep != "" {
		return external(ctx, ep)
	}
	_, binErr := findBinary()
	if binErr == nil {
		return Start(ctx)
	}
	if !errors.Is(binErr, ErrUnavailable) {
		return nil, binErr // e.g. PUBSUB_EMULATOR_BIN points nowhere: say so, don't fall back
	}
	e, dockerErr := startContainer(ctx)
	if dockerErr == nil {
		return e, nil
	}
	if !errors.Is(dockerErr, ErrUnavailable) {
		return nil, dockerErr
	}
	return nil, fmt.Errorf("%w; %s\n(binary: %s; docker: %s)", ErrUnavailable, unavailableHelp, reason(binErr), reason(dockerErr))
}

// reason drops the redundant ErrUnavailable prefix from a sub-error.
func reason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrUnavailable.Error()+": ")
}

// external checks that the configured emulator answers and wraps it.
func external(ctx context.Context, endpoint string) (*Emulator, error) {
	ctx, cancel := context.WithTimeout(ctx, externalTimeout)
	defer cancel()
	if err := waitReady(ctx, endpoint, Project, nil, nil); err != nil {
		return nil, fmt.Errorf("%s=%s is set but does not answer; start it (scripts/emulator start PORT) or unset %s: %w",
			EnvEndpoint, endpoint, EnvEndpoint, err)
	}
	return &Emulator{Endpoint: endpoint, Project: Project, Kind: KindExternal}, nil
}

// Binary-wide state set up by Main and used by Require.
var shared struct {
	mu       sync.Mutex
	main     bool // Main is running
	once     sync.Once
	emulator *Emulator
	err      error
	took     time.Duration // how long acquisition took
}

// Main is meant to be called from TestMain. It runs the tests and then stops
// the binary-wide emulator (if one was started) before os.Exit. The emulator
// is started lazily by the first Require, so test binaries (or -run
// selections) that never need it do not pay the JVM start-up.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain that has more to clean up after the tests: it
// returns the exit code instead of exiting.
func Run(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	e := shared.emulator
	shared.mu.Unlock()
	if e != nil {
		if err := e.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "emulator: stopping the test emulator at %s: %v\n", e.Endpoint, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Require returns the binary-wide emulator, acquiring it on first use. If no
// emulator can be provided it skips the test with a message naming the three
// ways to provide one (or fails when PUBSUB_IT_REQUIRE=1). If an emulator
// was found but could not be started, the test fails with its output. Under
// -short it skips the test.
func Require(t testing.TB) *Emulator {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping under -short: the test needs the emulator, a JVM")
	}
	shared.mu.Lock()
	mainCalled := shared.main
	shared.mu.Unlock()
	if !mainCalled {
		t.Fatal("emulator.Require needs emulator.Main to own the emulator's lifetime; add:\n\tfunc TestMain(m *testing.M) { emulator.Main(m) }")
	}
	first := false
	shared.once.Do(func() {
		first = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		start := time.Now()
		e, err := acquire(ctx)
		shared.mu.Lock()
		shared.emulator, shared.err, shared.took = e, err, time.Since(start)
		shared.mu.Unlock()
	})
	shared.mu.Lock()
	e, err, took := shared.emulator, shared.err, shared.took
	shared.mu.Unlock()
	switch {
	case err == nil:
		if first {
			t.Logf("emulator: using %s emulator at %s (project %s), acquired in %v", e.Kind, e.Endpoint, e.Project, took.Round(time.Millisecond))
		}
		return e
	case errors.Is(err, ErrUnavailable) && !truthy(os.Getenv(EnvRequire)):
		t.Skipf("skipping: %v", err)
	default:
		t.Fatalf("emulator: %v", err)
	}
	return nil
}

func truthy(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "y", "yes":
		return true
	}
	return false
}
