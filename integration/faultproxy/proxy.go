// Package faultproxy is a loopback TCP proxy for fault-injection tests: it
// sits between a client under test and a real server (the Pub/Sub emulator)
// and, on command, breaks every open connection, stops forwarding bytes
// without closing anything, or refuses new connections. A TCP proxy rather
// than a gRPC interceptor because the faults under test are the transport's:
// a stream reset mid-pull, a connection refused while a publish retries. The
// client sees exactly what a network or server outage looks like.
//
//	p, err := faultproxy.Start(emulatorEndpoint)
//	defer p.Close()
//	// point the client at p.Addr(), then:
//	p.DropAll()          // every open connection closed now
//	p.Refuse(); p.Accept() // new connections closed at once, until Accept
//	p.Stall(); p.Resume()  // bytes held both ways, connections kept
//
// Every control takes effect before it returns, and Stats/Await report what
// the proxy saw, so tests synchronise on the proxy's own counts instead of
// sleeping.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds connecting to the target. A target that is down (a
// killed emulator) refuses at once on loopback; the bound only matters for
// one that hangs.
const dialTimeout = 5 * time.Second

// copyBufferSize is one read's worth of bytes forwarded at a time.
const copyBufferSize = 32 << 10

// Stats counts what the proxy did since it started.
type Stats struct {
	Accepted      int64 // connections accepted and connected to the target
	Refused       int64 // connections closed on arrival by Refuse
	DialFailed    int64 // connections closed because the target did not answer
	Dropped       int64 // connections closed by DropAll
	Closed        int64 // connections that ended by themselves (either side closed)
	Open          int   // connections open now
	Held          int   // chunks read but held by Stall, not yet forwarded
	BytesToTarget int64 // bytes forwarded from clients to the target
	BytesToClient int64 // bytes forwarded from the target to clients
}

// Proxy forwards every connection accepted on Addr to the target until
// Close. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every pump

	mu       sync.Mutex
	links    map[*link]struct{}
	refusing bool
	stalled  chan struct{} // non-nil while stalled; closed by Resume
	closed   bool
	stats    Stats
	changed  chan struct{} // closed and replaced whenever stats change
}

// link is one proxied connection: the accepted client side and the dialed
// target side, closed together.
type link struct {
	client, target net.Conn
	once           sync.Once
	done           chan struct{}
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.target.Close()
	})
}

// Start listens on 127.0.0.1 on a free port and forwards to target
// (host:port).
func Start(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultproxy: target %q is not host:port: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen on a loopback port: %w", err)
	}
	p := &Proxy{target: target, ln: ln, links: map[*link]struct{}{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the host:port clients should connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the host:port the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Stats returns a snapshot of the counts.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statsLocked()
}

func (p *Proxy) statsLocked() Stats {
	s := p.stats
	s.Open = len(p.links)
	return s
}

// Await waits until cond holds for the proxy's counts or ctx ends; the
// error then says what the counts were.
func (p *Proxy) Await(ctx context.Context, cond func(Stats) bool) error {
	for {
		p.mu.Lock()
		s, changed := p.statsLocked(), p.changed
		p.mu.Unlock()
		if cond(s) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("faultproxy: condition not met (%w); counts: %+v", context.Cause(ctx), s)
		}
	}
}

// DropAll closes every open connection, both sides, and returns how many it
// closed. New connections are still accepted (unless refusing).
func (p *Proxy) DropAll() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
		delete(p.links, l)
	}
	p.stats.Dropped += int64(len(links))
	p.notifyLocked()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// Refuse makes the proxy close every new connection as soon as it is
// accepted, until Accept. Open connections are left alone: combine with
// DropAll for a full outage.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = true
}

// Accept ends Refuse.
func (p *Proxy) Accept() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = false
}

// Stall stops forwarding bytes in both directions on every connection, open
// or new, without closing any, until Resume. What was read while stalled is
// held and forwarded, in order, on Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Resume ends Stall.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// Close stops accepting, closes every connection, and waits for every
// goroutine of the proxy to return. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
		delete(p.links, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) count(f func(*Stats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.stats)
	p.notifyLocked()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (e.g. too many open files): the
			// client sees its connection fail, which is a fault too.
			continue
		}
		p.mu.Lock()
		refusing := p.refusing || p.closed
		p.mu.Unlock()
		if refusing {
			_ = c.Close()
			p.count(func(s *Stats) { s.Refused++ })
			continue
		}
		// Dialled on its own goroutine so a slow target never holds up
		// accepting (and refusing) other connections.
		p.wg.Add(1)
		go p.connect(c)
	}
}

// connect dials the target for an accepted client and starts forwarding.
func (p *Proxy) connect(c net.Conn) {
	defer p.wg.Done()
	t, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		_ = c.Close()
		p.count(func(s *Stats) { s.DialFailed++ })
		return
	}
	l := &link{client: c, target: t, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.refusing {
		// Close or Refuse came while dialling: honour it.
		p.mu.Unlock()
		l.close()
		p.count(func(s *Stats) { s.Refused++ })
		return
	}
	p.links[l] = struct{}{}
	p.stats.Accepted++
	p.notifyLocked()
	p.mu.Unlock()
	p.wg.Add(2)
	go p.pump(l, c, t, func(s *Stats, n int64) { s.BytesToTarget += n })
	go p.pump(l, t, c, func(s *Stats, n int64) { s.BytesToClient += n })
}

// pump copies src to dst, holding each chunk while stalled, and closes the
// link when either side ends.
func (p *Proxy) pump(l *link, src, dst net.Conn, forwarded func(*Stats, int64)) {
	defer p.wg.Done()
	defer p.end(l)
	buf := make([]byte, copyBufferSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitUnstalled(l) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			p.count(func(s *Stats) { forwarded(s, int64(n)) })
		}
		if err != nil {
			return
		}
	}
}

// waitUnstalled returns once forwarding may go on (true) or the link was
// closed while waiting (false). A held chunk counts in Stats.Held.
func (p *Proxy) waitUnstalled(l *link) bool {
	p.mu.Lock()
	gate := p.stalled
	if gate == nil {
		p.mu.Unlock()
		return true
	}
	p.stats.Held++
	p.notifyLocked()
	p.mu.Unlock()
	defer p.count(func(s *Stats) { s.Held-- })
	select {
	case <-gate:
		return true
	case <-l.done:
		return false
	}
}

// end closes a link that ended by itself; one DropAll or Close removed is
// already counted there.
func (p *Proxy) end(l *link) {
	p.mu.Lock()
	_, open := p.links[l]
	if open {
		delete(p.links, l)
		p.stats.Closed++
		p.notifyLocked()
	}
	p.mu.Unlock()
	l.close()
}
