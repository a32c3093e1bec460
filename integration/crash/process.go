package crash

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/proc"
)

// Process is one run of a binary as a child process that a test can
// SIGKILL, its output captured so a failure can show it.
type Process struct {
	*proc.Child
	name   string
	group  bool // the process leads a process group that Kill ends whole
	outBuf *outputBuffer
	errBuf *outputBuffer
}

// Start starts bin with args; name labels the process in messages. The
// process is SIGKILLed, if still running, when the test ends, and on
// Linux by the kernel if the test binary dies first (package proc).
func Start(t testing.TB, bin, name string, args ...string) *Process {
	t.Helper()
	return start(t, bin, name, false, args...)
}

// StartGroup is Start for a process that starts processes of its own (a
// job server starting SDK workers): it leads a new process group, and Kill
// and the test's end SIGKILL the whole group, by its ID, so that no worker
// outlives the test. It runs in a temporary directory, where what its
// children write (the Go boot program writes pipeline_options.json) stays.
func StartGroup(t testing.TB, bin, name string, args ...string) *Process {
	t.Helper()
	return start(t, bin, name, true, args...)
}

func start(t testing.TB, bin, name string, group bool, args ...string) *Process {
	t.Helper()
	p := &Process{name: name, group: group, outBuf: newOutputBuffer(), errBuf: newOutputBuffer()}
	cmd := exec.Command(bin, args...)
	if group {
		cmd.Dir = t.TempDir()
	}
	cmd.Stdout, cmd.Stderr = p.outBuf, p.errBuf
	var err error
	if p.Child, err = proc.StartCmd(cmd, group); err != nil {
		t.Fatalf("starting %s (%s): %v", name, bin, err)
	}
	t.Cleanup(func() {
		if p.Kill() {
			t.Logf("%s: still running at the end of the test; SIGKILLed", name)
		}
	})
	return p
}

// Kill sends SIGKILL to the process (by its PID), or to its whole group
// (StartGroup), and reaps it; it reports whether the process was still
// running.
func (p *Process) Kill() bool {
	if p.group {
		// The group's other members may outlive its leader.
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	}
	if !p.Running() {
		return false
	}
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.Exited()
	return true
}

// Wait waits for the process to exit 0 within timeout; otherwise it kills
// it and returns an error carrying the tail of its output.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.Exited():
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not finish within %v; killed it. stderr tail:\n%s", p.name, timeout, Tail(p.Stderr(), 4000))
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("%s: %v; stderr tail:\n%s", p.name, err, Tail(p.Stderr(), 4000))
	}
	return nil
}

// AwaitStderrLine waits until a line containing s appears on the process's
// stderr, the process exits, or timeout passes.
func (p *Process) AwaitStderrLine(s string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		changed := p.errBuf.changedChan()
		if strings.Contains(p.Stderr(), s) {
			return nil
		}
		select {
		case <-changed:
		case <-p.Exited():
			if strings.Contains(p.Stderr(), s) {
				return nil
			}
			return fmt.Errorf("%s exited (%v) before printing %q; stderr tail:\n%s", p.name, p.Err(), s, Tail(p.Stderr(), 4000))
		case <-deadline.C:
			return fmt.Errorf("%s did not print %q within %v; stderr tail:\n%s", p.name, s, timeout, Tail(p.Stderr(), 4000))
		}
	}
}

// Stdout returns what the process wrote on stdout so far.
func (p *Process) Stdout() string { return p.outBuf.String() }

// Stderr returns what the process wrote on stderr so far.
func (p *Process) Stderr() string { return p.errBuf.String() }

// outputBuffer is an io.Writer a child process writes into while the test
// reads it, with a channel closed on every write.
type outputBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newOutputBuffer() *outputBuffer {
	return &outputBuffer{changed: make(chan struct{})}
}

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *outputBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *outputBuffer) changedChan() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// Tail returns the last n bytes of s, from a line start where possible,
// "..." marking the cut: the end of a process's output, for a failure
// message.
func Tail(s string, n int) string {
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
