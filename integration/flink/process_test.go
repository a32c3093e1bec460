//go:build unix

package flink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProcessOutputIsItsOwn: a process started again under the same log
// (a job server after KillJobServer, a retried launch) is judged by what it
// wrote, not by its predecessor's BindException, which made every retry of
// a launch fail as "port already in use".
func TestProcessOutputIsItsOwn(t *testing.T) {
	log := filepath.Join(t.TempDir(), "jobserver.log")
	if err := os.WriteFile(log, []byte("java.net.BindException: Address already in use\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := startProcess("jobserver", "/bin/sh", []string{"-c", "echo listening"}, t.TempDir(), log, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatal("sh did not exit within a minute")
	}
	out := p.output(64 << 10)
	if portTaken(out) || !strings.Contains(out, "listening") {
		t.Errorf("output of the second process = %q, want its own line only", out)
	}
	if whole := readTail(log, 0, 64<<10); !portTaken(whole) {
		t.Errorf("the log lost the first process's output: %q", whole)
	}
}
