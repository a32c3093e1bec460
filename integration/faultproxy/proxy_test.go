package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitBudget bounds every wait in these tests; they pass in milliseconds.
const waitBudget = 10 * time.Second

// echoServer is a real TCP server that writes back what it reads and
// counts the bytes it received.
type echoServer struct {
	ln       net.Listener
	received atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						e.received.Add(int64(n))
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing the proxy: %v", err)
		}
	})
	return p
}

func dialProxy(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), waitBudget)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads it back through the proxy.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(waitBudget))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading back %q: got %q: %v", msg, got, err)
	}
	if string(got) != msg {
		t.Fatalf("read back %q, want %q", got, msg)
	}
}

// wantClosed reads c until the proxy's close reaches it: EOF or a reset,
// never the deadline.
func wantClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitBudget))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v: %v", waitBudget, err)
	}
}

func await(t *testing.T, p *Proxy, cond func(Stats) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBudget)
	defer cancel()
	if err := p.Await(ctx, cond); err != nil {
		t.Fatal(err)
	}
}

func TestForwardsBothWays(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	c := dialProxy(t, p)
	roundTrip(t, c, "hello")
	roundTrip(t, c, string(bytes.Repeat([]byte("x"), 100<<10)))
	s := p.Stats()
	if s.Accepted != 1 || s.Open != 1 || s.BytesToTarget != 5+100<<10 {
		t.Errorf("stats %+v, want 1 accepted, 1 open, %d bytes to the target", s, 5+100<<10)
	}
}

// DropAll closes every open connection on both sides and keeps accepting.
func TestDropAllClosesOpenConnectionsAndKeepsAccepting(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c := dialProxy(t, p)
		roundTrip(t, c, "ping")
		conns = append(conns, c)
	}
	if n := p.DropAll(); n != 3 {
		t.Fatalf("DropAll closed %d connections, want 3", n)
	}
	for _, c := range conns {
		wantClosed(t, c)
	}
	c := dialProxy(t, p)
	roundTrip(t, c, "after the drop")
	s := p.Stats()
	if s.Dropped != 3 || s.Accepted != 4 || s.Open != 1 {
		t.Errorf("stats %+v, want 3 dropped, 4 accepted, 1 open", s)
	}
}

// Refuse closes new connections on arrival and leaves open ones alone;
// Accept ends it.
func TestRefuseClosesNewConnectionsUntilAccept(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	open := dialProxy(t, p)
	roundTrip(t, open, "before")

	p.Refuse()
	for i := 0; i < 2; i++ {
		wantClosed(t, dialProxy(t, p))
	}
	await(t, p, func(s Stats) bool { return s.Refused == 2 })
	roundTrip(t, open, "the open one still works")

	p.Accept()
	roundTrip(t, dialProxy(t, p), "accepted again")
	if s := p.Stats(); s.Accepted != 2 || s.Refused != 2 {
		t.Errorf("stats %+v, want 2 accepted, 2 refused", s)
	}
}

// Stall holds bytes without closing; Resume forwards them in order.
func TestStallHoldsBytesUntilResume(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	c := dialProxy(t, p)
	roundTrip(t, c, "warm")
	before := echo.received.Load()

	p.Stall()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	// The proxy read the chunk and holds it at the gate, so it cannot have
	// reached the server: the check below is a fact, not a wait.
	await(t, p, func(s Stats) bool { return s.Held == 1 })
	if got := echo.received.Load() - before; got != 0 {
		t.Fatalf("the server received %d bytes while the proxy was stalled", got)
	}
	if s := p.Stats(); s.Open != 1 || s.Dropped != 0 {
		t.Fatalf("stats %+v: a stall must not close anything", s)
	}

	p.Resume()
	got := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(waitBudget))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after Resume read %q (%v), want %q", got, err, "held")
	}
	await(t, p, func(s Stats) bool { return s.Held == 0 })
}

// DropAll ends a stalled connection too: nothing waits forever on the gate.
func TestDropAllEndsStalledConnections(t *testing.T) {
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())
	c := dialProxy(t, p)
	roundTrip(t, c, "warm")
	p.Stall()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	await(t, p, func(s Stats) bool { return s.Held == 1 })
	if n := p.DropAll(); n != 1 {
		t.Fatalf("DropAll closed %d, want 1", n)
	}
	wantClosed(t, c)
	await(t, p, func(s Stats) bool { return s.Held == 0 && s.Open == 0 })
}

// A target that is down: the client's connection is closed and counted.
func TestTargetDownClosesClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connecting is refused
	p := startProxy(t, target)
	wantClosed(t, dialProxy(t, p))
	await(t, p, func(s Stats) bool { return s.DialFailed == 1 })
}

// Close returns with a stalled connection open (its goroutines end), and
// closes the client's side.
func TestCloseEndsEverything(t *testing.T) {
	echo := startEcho(t)
	p, err := Start(echo.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := dialProxy(t, p)
	roundTrip(t, c, "warm")
	p.Stall()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	await(t, p, func(s Stats) bool { return s.Held == 1 })
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(waitBudget):
		t.Fatalf("Close did not return within %v with a stalled connection", waitBudget)
	}
	wantClosed(t, c)
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), waitBudget); err == nil {
		t.Error("the proxy still accepts after Close")
	}
}

func TestStartRejectsBadTarget(t *testing.T) {
	if _, err := Start("no-port"); err == nil {
		t.Error("Start accepted a target without a port")
	}
}
