//go:build unix

package emulator

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/integration/proc"
)

func startOwn(t *testing.T) *Emulator {
	t.Helper()
	if _, err := findBinary(); err != nil {
		t.Skipf("needs the emulator binary: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	start := time.Now()
	e, err := Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("started emulator pid %d at %s in %v", e.PID(), e.Endpoint, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("cleanup Stop: %v", err)
		}
	})
	return e
}

func alive(pid int) error { return syscall.Kill(pid, 0) }

// TestStartStopLeavesNoProcess: after Stop returns, the emulator's PID and
// process group are gone and its temp dir is removed.
func TestStartStopLeavesNoProcess(t *testing.T) {
	e := startOwn(t)
	pid := e.PID()
	dir := e.proc.dir
	if err := alive(pid); err != nil {
		t.Fatalf("emulator pid %d not alive after Start: %v", pid, err)
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("emulator pid %d: pgid %d (err %v), want its own group", pid, pgid, err)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := alive(pid); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("after Stop, kill(%d, 0) = %v, want ESRCH", pid, err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("after Stop, kill(-%d, 0) = %v, want ESRCH (process group empty)", pid, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("after Stop, temp dir %s: stat err %v, want not-exist", dir, err)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestRestart: same endpoint, new process, old one gone, state reset.
func TestRestart(t *testing.T) {
	e := startOwn(t)
	old := e.PID()
	topic := e.CreateTopic(t, "restart")
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	start := time.Now()
	if err := e.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	t.Logf("restarted at %s in %v: pid %d -> %d", e.Endpoint, time.Since(start).Round(time.Millisecond), old, e.PID())
	if err := alive(old); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("old pid %d: kill(0) = %v, want ESRCH", old, err)
	}
	if e.PID() == 0 || e.PID() == old {
		t.Fatalf("pid after restart = %d (old %d)", e.PID(), old)
	}
	c, err := e.adminClient()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topic.String()})
	if err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("GetTopic(%s) after restart: err %v, want NotFound (fresh state)", topic, err)
	}
}

// TestExternalEndpoint: PUBSUB_IT_EMULATOR is used as is and never stopped.
func TestExternalEndpoint(t *testing.T) {
	own := startOwn(t)
	t.Setenv(EnvEndpoint, own.Endpoint)
	e, err := acquire(t.Context())
	if err != nil {
		t.Fatalf("acquire with %s=%s: %v", EnvEndpoint, own.Endpoint, err)
	}
	if e.Kind != KindExternal || e.Endpoint != own.Endpoint {
		t.Fatalf("got %s emulator at %s, want external at %s", e.Kind, e.Endpoint, own.Endpoint)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop external: %v", err)
	}
	if err := alive(own.PID()); err != nil {
		t.Fatalf("stopping the external emulator killed pid %d: %v", own.PID(), err)
	}
}

// TestPortTakenFailsFast: a failed bind leaves the JVM running, so start-up
// must notice it in the output, kill the process and say proc.ErrPortTaken (which
// Start retries on another port) instead of waiting out the ready timeout.
func TestPortTakenFailsFast(t *testing.T) {
	bin, err := findBinary()
	if err != nil {
		t.Skipf("needs the emulator binary: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	start := time.Now()
	p, err := startProcess(ctx, bin, l.Addr().String())
	if err == nil {
		p.stop()
		t.Fatalf("startProcess on a taken port %s succeeded", l.Addr())
	}
	if !errors.Is(err, proc.ErrPortTaken) {
		t.Fatalf("startProcess on taken port: %v, want proc.ErrPortTaken", err)
	}
	t.Logf("failed after %v with: %.200s", time.Since(start).Round(time.Millisecond), err)
}
