package crash

import (
	"strings"
	"testing"
	"time"
)

func TestTail(t *testing.T) {
	if got := Tail("short", 10); got != "short" {
		t.Errorf("Tail of a short text = %q, want it whole", got)
	}
	// The cut falls inside "second": the tail starts at the next line.
	if got, want := Tail("first\nsecond\nthird\n", 9), "...\nthird\n"; got != want {
		t.Errorf("Tail = %q, want %q", got, want)
	}
}

func TestProcessOutputAndExit(t *testing.T) {
	p := Start(t, "/bin/sh", "sh", "-c", "echo out; echo ready >&2; exit 3")
	if err := p.AwaitStderrLine("ready", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	err := p.Wait(10 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "ready") {
		t.Errorf("Wait = %v, want exit status 3 and the stderr tail", err)
	}
	if p.Stdout() != "out\n" || p.Running() || p.Err() == nil {
		t.Errorf("stdout %q, running %v, Err %v; want out, exited, an error", p.Stdout(), p.Running(), p.Err())
	}
}

func TestProcessKill(t *testing.T) {
	// exec: the shell becomes sleep, so the SIGKILL reaches the process
	// that holds the output pipes (a surviving child would keep Wait
	// waiting for them).
	p := Start(t, "/bin/sh", "sleeper", "-c", "exec sleep 60")
	if !p.Running() || p.Err() != nil {
		t.Fatalf("running %v, Err %v just after the start", p.Running(), p.Err())
	}
	if !p.Kill() {
		t.Fatal("Kill reported the process already gone")
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited not closed after Kill")
	}
	if p.Kill() || p.Err() == nil {
		t.Errorf("a second Kill reported a running process, or Err is nil (%v)", p.Err())
	}
}
