//go:build unix

// Package proc starts the integration tests' child processes: the
// pipelines a test crashes, the Pub/Sub emulator, Flink's JVMs. On Linux
// the kernel SIGKILLs a child when the thread that started it dies, so that
// a test binary killed by go test -timeout or a panic leaks no process. A
// Process leads a process group of its own, so that what it starts (an SDK
// worker, a launcher's java) is killed with it.
package proc

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

// StopTimeout bounds each wait of Kill: for the leader to be reaped, and
// for the rest of its group to be gone.
const StopTimeout = 15 * time.Second

// Child is a started command and its exit.
type Child struct {
	Cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // valid once exited is closed
}

// StartCmd starts cmd, which the kernel SIGKILLs when the thread that
// started it dies (on Linux), and reaps it when it exits. With group, cmd
// leads a process group of its own, which Process.Kill ends whole.
func StartCmd(cmd *exec.Cmd, group bool) (*Child, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = group
	setPdeathsig(cmd.SysProcAttr)
	c := &Child{Cmd: cmd, exited: make(chan struct{})}
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
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// Exited is closed once the child has been reaped.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Err is how the child exited (nil for status 0, or while it runs).
func (c *Child) Err() error {
	if c.Running() {
		return nil
	}
	return c.waitErr
}

// Running reports whether the child has not been reaped yet.
func (c *Child) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// Process is a running child that leads its own process group, its output
// in a log file.
type Process struct {
	*Child
	Name    string    // labels the process in errors
	PID     int       // also the process group ID
	Started time.Time // when it was started
	logPath string
	logFrom int64 // where this process's output starts in logPath
}

// Start runs bin with args in dir, with env (nil: this process's), its
// stdout and stderr appended to logPath after a line naming the command.
func Start(name, bin string, args []string, dir, logPath string, env []string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proc: %s log: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	from, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("proc: %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf // an *os.File: the child writes directly, no copier goroutine
	c, err := StartCmd(cmd, true)
	if err != nil {
		return nil, fmt.Errorf("proc: start %s (%s): %w", name, bin, err)
	}
	return &Process{Child: c, Name: name, PID: cmd.Process.Pid, Started: time.Now(), logPath: logPath, logFrom: from}, nil
}

// Kill SIGKILLs the process group, waits for the leader to be reaped and
// for the group to be empty, each wait bounded by StopTimeout.
func (p *Process) Kill() error {
	if err := syscall.Kill(-p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("proc: kill %s process group %d: %w", p.Name, p.PID, err)
	}
	select {
	case <-p.Exited():
	case <-time.After(StopTimeout):
		return fmt.Errorf("proc: %s (pid %d) not reaped within %v of SIGKILL; check `pgrep -a -g %d`", p.Name, p.PID, StopTimeout, p.PID)
	}
	deadline := time.Now().Add(StopTimeout)
	for {
		err := syscall.Kill(-p.PID, 0)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("proc: probe %s process group %d: %w", p.Name, p.PID, err)
		}
		_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		if time.Now().After(deadline) {
			return fmt.Errorf("proc: %s process group %d still has members %v after SIGKILL; see `pgrep -a -g %d`", p.Name, p.PID, StopTimeout, p.PID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Output returns the last max bytes this process wrote to its log, which
// may hold the output of an earlier process of the same name (a job server
// started again, a launch retried).
func (p *Process) Output(max int) string { return ReadTail(p.logPath, p.logFrom, max) }

// ReadTail returns the last max bytes of the file at path, from offset
// from on.
func ReadTail(path string, from int64, max int) string {
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
