//go:build unix

package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputIsItsOwn: a process started again under the same log (a job
// server after KillJobServer, a retried launch) is judged by what it
// wrote, not by its predecessor's BindException, which made every retry of
// a launch fail as "port already in use".
func TestOutputIsItsOwn(t *testing.T) {
	log := filepath.Join(t.TempDir(), "jobserver.log")
	if err := os.WriteFile(log, []byte("java.net.BindException: Address already in use\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Start("jobserver", "/bin/sh", []string{"-c", "echo listening"}, t.TempDir(), log, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(time.Minute):
		t.Fatal("sh did not exit within a minute")
	}
	out := p.Output(64 << 10)
	if PortTaken(out) || !strings.Contains(out, "listening") {
		t.Errorf("output of the second process = %q, want its own line only", out)
	}
	if whole := ReadTail(log, 0, 64<<10); !PortTaken(whole) {
		t.Errorf("the log lost the first process's output: %q", whole)
	}
}

// TestKillEndsTheGroup: Kill ends what the process started too (a
// launcher's java, a job server's SDK workers), and returns only once the
// group is empty.
func TestKillEndsTheGroup(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "group.log")
	p, err := Start("group", "/bin/sh", []string{"-c", "sleep 600 & echo $!; wait"}, dir, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pgid, err := syscall.Getpgid(p.PID); err != nil || pgid != p.PID {
		t.Fatalf("pid %d: pgid %d (err %v), want a group of its own", p.PID, pgid, err)
	}
	child := awaitChild(t, p)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Error("Kill returned while the leader was running")
	}
	if err := syscall.Kill(-p.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Kill, kill(-%d, 0) = %v, want ESRCH (process group empty)", p.PID, err)
	}
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Kill, the leader's child %d: kill(%d, 0) = %v, want ESRCH", child, child, err)
	}
}

// awaitChild returns the PID the shell of TestKillEndsTheGroup printed for
// its background child, waiting up to a minute for it.
func awaitChild(t *testing.T, p *Process) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, line := range strings.Split(p.Output(4<<10), "\n") {
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell printed no child PID within a minute; its output: %q", p.Output(4<<10))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
