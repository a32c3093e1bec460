package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

// The crash tests' shared machinery: the pipeline binary (crashpipeline)
// run as a child process that can be SIGKILLed, and a watcher of the output
// topic that says, under deadlines, which input IDs arrived and how often.

// Environment variables that scale the crash tests (scripts/reliability sets
// them for the long run; CI uses the defaults).
const (
	envCrashMessages    = "PUBSUB_IT_CRASH_MESSAGES"     // input backlog size
	envCrashKills       = "PUBSUB_IT_CRASH_KILLS"        // SIGKILLs of the whole process per variant
	envCrashSeed        = "PUBSUB_IT_CRASH_SEED"         // replays a run's kill points
	envCrashWorkerKills = "PUBSUB_IT_CRASH_WORKER_KILLS" // SIGKILLs of the SDK worker under a standalone Prism
)

// inputIDAttribute must equal crashpipeline's InputIDAttribute (a main
// package cannot be imported).
const inputIDAttribute = "crash.input_id"

// Lines crashpipeline prints (see its DoneLine and StalledLine).
const (
	crashDoneLine    = "crashpipeline: pipeline finished"
	crashStalledLine = "crashpipeline: transform stalled"
)

// Bounds. A killed process's messages stay leased for at most the
// pipeline's --max_ack_extension (10 s) or the subscription's ack deadline
// (10 s), so every wait below leaves several lease periods of room.
const (
	crashAckDeadline   = 10 * time.Second // input subscription
	crashIdleTimeout   = 30 * time.Second // completion runs end this long after the last message
	crashCompleteLimit = 12 * time.Minute // completion runs, all together (a replay needed 7.5 min)
	crashRunLimit      = 10 * time.Minute // one completion run, 20,000 messages on a loaded box
	crashArrivalLimit  = 2 * time.Minute  // the last outputs to show up, and a failing test's diagnosis
	crashSettleLimit   = 10 * time.Second // outputs to show up once a completion run ended (it published them before exiting)
	crashPayloadSize   = 256
)

func crashEnvInt(t *testing.T, name string, def int) int {
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

// crashRand returns the run's random source and logs its seed, so a failing
// sequence of kill points can be replayed with PUBSUB_IT_CRASH_SEED.
func crashRand(t *testing.T) (*rand.Rand, int64) {
	t.Helper()
	seed := time.Now().UnixNano()
	if v := strings.TrimSpace(os.Getenv(envCrashSeed)); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an integer", envCrashSeed, v)
		}
	}
	t.Logf("kill points seeded with %d (replay: %s=%d)", seed, envCrashSeed, seed)
	return rand.New(rand.NewSource(seed)), seed
}

// goBuild builds a main package into dir and returns the binary's path.
func crashGoBuild(t *testing.T, dir, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	start := time.Now()
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	t.Logf("built %s in %v", pkg, time.Since(start).Round(time.Millisecond))
	return bin
}

// buildCrashPipeline builds integration/crashpipeline into a temp dir.
func buildCrashPipeline(t *testing.T) string {
	return crashGoBuild(t, t.TempDir(), "github.com/pubsubio/beam-pubsubio/integration/crashpipeline", "crashpipeline")
}

// crashTopology is one crash test's Pub/Sub resources and backlog.
type crashTopology struct {
	e        *emulator.Emulator
	inSub    string   // input subscription, full name
	outTopic string   // output topic, full name
	inputIDs []string // published backlog
	out      *outputWatcher
}

// newCrashTopology creates an input topic and subscription, an output topic
// and subscription, starts watching the output and publishes n messages.
func newCrashTopology(t *testing.T, e *emulator.Emulator, prefix string, n int) *crashTopology {
	t.Helper()
	in := e.CreateTopic(t, prefix+"-in")
	c := &crashTopology{
		e:        e,
		inSub:    e.CreateSubscription(t, in, prefix+"-in", crashAckDeadline),
		outTopic: e.CreateTopic(t, prefix+"-out"),
	}
	outSub := e.CreateSubscription(t, c.outTopic, prefix+"-out", 60*time.Second)
	c.out = watchOutput(t, e.Client(t), outSub)
	start := time.Now()
	c.inputIDs = e.Publish(t, in, n, crashPayloadSize, nil)
	t.Logf("published %d messages of %d bytes in %v", n, crashPayloadSize, time.Since(start).Round(time.Millisecond))
	return c
}

// args returns crashpipeline's flags for this topology plus extra.
func (c *crashTopology) args(extra ...string) []string {
	return append([]string{
		"--emulator=" + c.e.Endpoint,
		"--subscription=" + c.inSub,
		"--output_topic=" + c.outTopic,
	}, extra...)
}

// complete runs the pipeline bounded by idleness, again and again until
// every input ID is on the output or crashCompleteLimit has passed. More
// than one run is normal on the emulator: it gives a killed consumer's
// messages back 30-60 s after the kill, sometimes later (measured), and a
// run can end idle before that; those messages are late, not lost. A
// message still missing at the end is reported by verify.
func (c *crashTopology) complete(t *testing.T, bin string, extra ...string) (runs int) {
	t.Helper()
	deadline := time.Now().Add(crashCompleteLimit)
	for runs = 1; ; runs++ {
		p := startCrashProcess(t, bin, fmt.Sprintf("completion-%d", runs), c.args(append(extra, "--idle_timeout="+crashIdleTimeout.String())...)...)
		start := time.Now()
		if err := p.wait(crashRunLimit); err != nil {
			t.Fatalf("completion run %d: %v", runs, err)
		}
		if !strings.Contains(p.stdout(), crashDoneLine) {
			t.Fatalf("completion run %d exited 0 without %q; stdout:\n%s", runs, crashDoneLine, p.stdout())
		}
		missing := c.out.awaitAll(c.inputIDs, crashSettleLimit)
		t.Logf("completion run %d took %v; %d of %d input IDs on the output", runs, time.Since(start).Round(time.Millisecond), len(c.inputIDs)-len(missing), len(c.inputIDs))
		if len(missing) == 0 || time.Now().After(deadline) {
			return runs
		}
	}
}

// verify fails the test for every input ID missing from the output and
// logs the summary line RELIABILITY.md's figures come from.
func (c *crashTopology) verify(t *testing.T, variant string, seed int64, kills, completionRuns int, took time.Duration) {
	t.Helper()
	missing := c.out.awaitAll(c.inputIDs, crashArrivalLimit)
	st := c.out.stats(c.inputIDs)
	t.Logf("CRASH SUMMARY variant=%s messages=%d kills=%d seed=%d lost=%d duplicates=%d duplicated_inputs=%d output_deliveries=%d completion_runs=%d took=%v",
		variant, len(c.inputIDs), kills, seed, len(missing), st.duplicates, st.duplicatedInputs, st.deliveries, completionRuns, took.Round(time.Second))
	if len(missing) > 0 {
		back := c.stillUnacked(t, missing, crashArrivalLimit)
		t.Errorf("%d of %d input messages never reached the output topic (replay with %s=%d), e.g. %v; "+
			"%d of them were still unacked on the input subscription (delivered again to a plain receiver within %v), the other %d were not",
			len(missing), len(c.inputIDs), envCrashSeed, seed, missing[:min(10, len(missing))],
			len(back), crashArrivalLimit, len(missing)-len(back))
	}
}

// stillUnacked receives the input subscription with a plain client for up
// to timeout and returns which of ids Pub/Sub delivered again: those were
// never acked (late, not lost); the rest were acked without reaching the
// output. It acks what it receives, so it is only for a failing test's
// diagnosis.
func (c *crashTopology) stillUnacked(t *testing.T, ids []string, timeout time.Duration) map[string]time.Duration {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	var mu sync.Mutex
	back := map[string]time.Duration{}
	err := c.e.Client(t).Subscriber(c.inSub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if want[m.ID] {
			if _, ok := back[m.ID]; !ok {
				back[m.ID] = time.Since(start)
			}
		}
		if len(back) == len(want) {
			cancel()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	var last time.Duration
	for _, d := range back {
		last = max(last, d)
	}
	t.Logf("diagnosis: %d of %d missing IDs came back from %s within %v (the last after %v); Receive: %v", len(back), len(want), c.inSub, timeout, last.Round(time.Millisecond), err)
	return back
}

// outputWatcher receives the output subscription for the whole test and
// records, per input ID, the distinct output message IDs carrying it.
type outputWatcher struct {
	mu         sync.Mutex
	byInput    map[string]map[string]bool // input ID -> output message IDs
	deliveries int
	foreign    int           // messages without the input ID attribute
	changed    chan struct{} // closed and replaced on every new output
	done       chan struct{}
	err        error
}

func watchOutput(t *testing.T, client *pubsub.Client, sub string) *outputWatcher {
	w := &outputWatcher{byInput: map[string]map[string]bool{}, changed: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(w.done)
		err := client.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			w.mu.Lock()
			defer w.mu.Unlock()
			w.deliveries++
			in, ok := m.Attributes[inputIDAttribute]
			if !ok {
				w.foreign++
				return
			}
			if w.byInput[in] == nil {
				w.byInput[in] = map[string]bool{}
			}
			if !w.byInput[in][m.ID] {
				w.byInput[in][m.ID] = true
				close(w.changed)
				w.changed = make(chan struct{})
			}
		})
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// distinct returns how many input IDs reached the output.
func (w *outputWatcher) distinct() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byInput)
}

// awaitDistinct waits until at least n input IDs reached the output or
// timeout passes, and returns how many did.
func (w *outputWatcher) awaitDistinct(n int, timeout time.Duration) int {
	return awaitAtLeast(n, timeout, func() (int, <-chan struct{}) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.byInput), w.changed
	})
}

// awaitAtLeast waits until current reports at least n or timeout passes,
// and returns the last count. current returns the count and a channel that
// is closed at the next change.
func awaitAtLeast(n int, timeout time.Duration, current func() (int, <-chan struct{})) int {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		got, changed := current()
		if got >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			return got
		}
	}
}

// awaitAll waits until every one of ids reached the output or timeout
// passes, and returns the missing ones, sorted.
func (w *outputWatcher) awaitAll(ids []string, timeout time.Duration) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		var missing []string
		for id := range want {
			if w.byInput[id] == nil {
				missing = append(missing, id)
			}
		}
		changed := w.changed
		w.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			sort.Strings(missing)
			return missing
		}
	}
}

// outputStats are the duplicate counts over ids.
type outputStats struct {
	duplicates       int // output messages beyond the first per input ID
	duplicatedInputs int // input IDs published more than once
	deliveries       int // every delivery to the watcher, redeliveries included
}

func (w *outputWatcher) stats(ids []string) outputStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := outputStats{deliveries: w.deliveries}
	for _, id := range ids {
		if n := len(w.byInput[id]); n > 1 {
			st.duplicates += n - 1
			st.duplicatedInputs++
		}
	}
	return st
}

// crashProcess is one run of a pipeline binary, its output captured in
// files so a failure can show it.
type crashProcess struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	outBuf *crashOutputBuffer
	errBuf *crashOutputBuffer
	exited chan struct{}
	err    error // set before exited is closed
}

// startCrashProcess starts bin with args. The process is SIGKILLed, if
// still running, when the test ends.
func startCrashProcess(t *testing.T, bin, name string, args ...string) *crashProcess {
	t.Helper()
	p := &crashProcess{t: t, name: name, outBuf: newCrashOutputBuffer(), errBuf: newCrashOutputBuffer(), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.outBuf, p.errBuf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s (%s): %v", name, bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if p.kill() {
			t.Logf("%s: still running at the end of the test; SIGKILLed", name)
		}
	})
	return p
}

// kill sends SIGKILL to the process (by its PID) and reaps it; it reports
// whether the process was still running.
func (p *crashProcess) kill() bool {
	select {
	case <-p.exited:
		return false
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	return true
}

// wait waits for the process to exit 0 within timeout; otherwise it kills
// it and returns an error carrying the tail of its output.
func (p *crashProcess) wait(timeout time.Duration) error {
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s did not finish within %v; killed it. stderr tail:\n%s", p.name, timeout, crashTail(p.stderr(), 4000))
	}
	if p.err != nil {
		return fmt.Errorf("%s: %v; stderr tail:\n%s", p.name, p.err, crashTail(p.stderr(), 4000))
	}
	return nil
}

// awaitStderrLine waits until a line containing s appears on the process's
// stderr, the process exits, or timeout passes.
func (p *crashProcess) awaitStderrLine(s string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		changed := p.errBuf.changedChan()
		if strings.Contains(p.stderr(), s) {
			return nil
		}
		select {
		case <-changed:
		case <-p.exited:
			if strings.Contains(p.stderr(), s) {
				return nil
			}
			return fmt.Errorf("%s exited (%v) before printing %q; stderr tail:\n%s", p.name, p.err, s, crashTail(p.stderr(), 4000))
		case <-deadline.C:
			return fmt.Errorf("%s did not print %q within %v; stderr tail:\n%s", p.name, s, timeout, crashTail(p.stderr(), 4000))
		}
	}
}

func (p *crashProcess) stdout() string { return p.outBuf.String() }
func (p *crashProcess) stderr() string { return p.errBuf.String() }

func (p *crashProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// crashOutputBuffer is an io.Writer a child process writes into while the test
// reads it, with a channel closed on every write.
type crashOutputBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newCrashOutputBuffer() *crashOutputBuffer {
	return &crashOutputBuffer{changed: make(chan struct{})}
}

func (b *crashOutputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *crashOutputBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *crashOutputBuffer) changedChan() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// tail returns the last n bytes of s, from a line start where possible.
func crashTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	sc := bufio.NewScanner(strings.NewReader(s))
	if sc.Scan() {
		s = s[len(sc.Text()):]
	}
	return "..." + s
}
