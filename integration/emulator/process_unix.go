//go:build unix

package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// process is a running cloud-pubsub-emulator, leader of its own process group.
type process struct {
	pid     int           // also the process group id (Setpgid)
	dir     string        // temp dir: working dir, java.io.tmpdir, log file
	logPath string        // captured stdout+stderr
	exited  chan struct{} // closed once the process has been reaped
	waitErr error         // exit status; valid after exited is closed
}

// startProcess runs bin serving endpoint and waits until it answers. On any
// failure the process is killed, its temp dir removed, and the error carries
// the emulator's output.
func startProcess(ctx context.Context, bin, endpoint string) (*process, error) {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return nil, fmt.Errorf("bad endpoint %q: %w", endpoint, err)
	}
	dir, err := os.MkdirTemp("", "pubsub-emulator-")
	if err != nil {
		return nil, fmt.Errorf("create emulator temp dir: %w", err)
	}
	p := &process{dir: dir, logPath: filepath.Join(dir, "emulator.log"), exited: make(chan struct{})}
	logf, err := os.Create(p.logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("create emulator log file: %w", err)
	}
	cmd := exec.Command(bin, "--host="+host, "--port="+port)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf // an *os.File: the child writes directly, no copier goroutine
	// Keep any JVM scratch files inside dir so Stop's RemoveAll gets them.
	opts := strings.TrimSpace(os.Getenv("CLOUD_PUBSUB_EMULATOR_OPTS") + " -Djava.io.tmpdir=" + dir)
	cmd.Env = append(os.Environ(), "CLOUD_PUBSUB_EMULATOR_OPTS="+opts)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)

	started := make(chan error, 1)
	go func() {
		// Pdeathsig is tied to the starting OS thread: pin this goroutine to
		// it and keep it alive until the child is reaped.
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
	err = <-started
	_ = logf.Close() // the child holds its own descriptor
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	p.pid = cmd.Process.Pid

	// A failed bind does not end the JVM (netty's threads keep it alive), so
	// watch the output for it instead of waiting for an exit.
	bindFailed := func() error {
		if portTaken(p.output(64 << 10)) {
			return errPortTaken
		}
		return nil
	}
	if err := waitReady(ctx, endpoint, Project, p.exited, bindFailed); err != nil {
		out := p.output(8 << 10)
		if stopErr := p.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		if portTaken(out) && !errors.Is(err, errPortTaken) {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return nil, fmt.Errorf("%w\n--- emulator output (pid %d) ---\n%s--- end of emulator output ---", err, p.pid, out)
	}
	return p, nil
}

// stop kills the whole process group with SIGKILL (the emulator keeps state
// in memory only, so there is nothing to shut down gracefully), waits for the
// child to be reaped, makes sure no group member survives, and removes the
// temp dir. Every wait is bounded.
func (p *process) stop() error {
	var errs []error
	if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		errs = append(errs, fmt.Errorf("kill emulator process group %d: %w", p.pid, err))
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		return fmt.Errorf("emulator pid %d was not reaped within %v of SIGKILL to its process group; "+
			"check `pgrep -a -g %d`, kill it by hand and remove %s", p.pid, stopTimeout, p.pid, p.dir)
	}
	if err := waitGroupGone(p.pid, stopTimeout); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(p.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove emulator temp dir: %w", err))
	}
	return errors.Join(errs...)
}

// waitGroupGone ensures process group pgid is empty. The launcher execs
// java, so after the leader is reaped this normally returns at once; a stray
// member (a launcher that forks) is killed and awaited, bounded by timeout.
func waitGroupGone(pgid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("probe emulator process group %d: %w", pgid, err)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if time.Now().After(deadline) {
			return fmt.Errorf("emulator process group %d still has members %v after the first SIGKILL; inspect with `pgrep -a -g %d`", pgid, timeout, pgid)
		}
		<-tick.C
	}
}

// output returns the tail (at most max bytes) of the captured output.
func (p *process) output(max int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(emulator output unavailable: %v)\n", err)
	}
	defer f.Close()
	prefix := ""
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(max) {
		if _, err := f.Seek(-int64(max), io.SeekEnd); err == nil {
			prefix = fmt.Sprintf("(... first %d bytes omitted ...)\n", fi.Size()-int64(max))
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)))
	if err != nil {
		return fmt.Sprintf("(reading emulator output: %v)\n", err)
	}
	s := prefix + string(b)
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}
