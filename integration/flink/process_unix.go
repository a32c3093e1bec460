//go:build unix

package flink

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// stopTimeout bounds the wait for a SIGKILLed process group to be gone.
const stopTimeout = 15 * time.Second

// process is one JVM, leader of its own process group (so that the SDK
// workers a job server or TaskManager starts die with it).
type process struct {
	name    string
	pid     int // also the process group id
	logPath string
	logFrom int64 // where this process's output starts in logPath
	started time.Time
	exited  chan struct{}
	waitErr error // valid once exited is closed
}

// startProcess runs bin with args in dir, its stdout and stderr appended
// to logPath.
func startProcess(name, bin string, args []string, dir, logPath string, env []string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("flink: %s log: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	from, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("flink: %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)
	p := &process{name: name, logPath: logPath, logFrom: from, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig is tied to the starting OS thread: keep this goroutine
		// on it until the child is reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("flink: start %s: %w", name, err)
	}
	p.pid = cmd.Process.Pid
	p.started = time.Now()
	return p, nil
}

// running reports whether the process has not been reaped yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill SIGKILLs the process group, waits for the leader to be reaped and
// for the group to be empty, every wait bounded.
func (p *process) kill() error {
	if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("flink: kill %s process group %d: %w", p.name, p.pid, err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		return fmt.Errorf("flink: %s (pid %d) not reaped within %v of SIGKILL; check `pgrep -a -g %d`", p.name, p.pid, stopTimeout, p.pid)
	}
	deadline := time.Now().Add(stopTimeout)
	for {
		err := syscall.Kill(-p.pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("flink: probe %s process group %d: %w", p.name, p.pid, err)
		}
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		if time.Now().After(deadline) {
			return fmt.Errorf("flink: %s process group %d still has members after %v; see `pgrep -a -g %d`", p.name, p.pid, stopTimeout, p.pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// output returns the last max bytes this process wrote to its log, which
// may hold the output of an earlier process of the same name (a job server
// started again, a launch retried).
func (p *process) output(max int) string { return readTail(p.logPath, p.logFrom, max) }

// readTail returns the last max bytes of the file at path, from offset
// from on.
func readTail(path string, from int64, max int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)\n", err)
	}
	defer f.Close()
	prefix := ""
	start := from
	if fi, err := f.Stat(); err == nil && fi.Size()-from > int64(max) {
		start = fi.Size() - int64(max)
		prefix = fmt.Sprintf("(... first %d bytes omitted ...)\n", start)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Sprintf("(reading log: %v)\n", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)))
	if err != nil {
		return fmt.Sprintf("(reading log: %v)\n", err)
	}
	return prefix + string(b)
}

// lockFile takes an exclusive advisory lock on path, for one classpath
// resolve at a time across test binaries.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("flink: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flink: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
