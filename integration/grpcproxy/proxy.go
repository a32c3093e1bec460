// Package grpcproxy relays every gRPC call it receives to one target,
// passing each message, undecoded, through a hook that may record or
// rewrite it. Tests put it between a client and a server to see what
// crosses: the Flink harness adds pipeline options to a job server's
// Prepare calls; the Flink tests record when Pub/Sub was asked to ack.
//
//	p, err := grpcproxy.Start(target, func(method string, fromClient bool, msg []byte) ([]byte, error) {
//		return msg, nil // observe, rewrite, or fail the call
//	})
//	defer p.Stop()
//	// point the client at p.Addr
package grpcproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// Hook sees every message of every call: method is the full method name
// ("/google.pubsub.v1.Subscriber/StreamingPull"), fromClient whether the
// message goes to the target. It returns the message to forward; an error
// ends the call with it.
type Hook func(method string, fromClient bool, msg []byte) ([]byte, error)

// Proxy relays calls to its target until Stop.
type Proxy struct {
	// Addr is the proxy's host:port.
	Addr string

	target string
	hook   Hook
	srv    *grpc.Server
	stop   sync.Once

	mu   sync.Mutex
	conn *grpc.ClientConn // replaced by connection once in backoff
}

// Start serves a proxy of target (host:port, plaintext) on a free loopback
// port.
func Start(target string, hook Hook) (*Proxy, error) {
	conn, err := dial(target)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("grpcproxy: %w", err)
	}
	p := &Proxy{Addr: lis.Addr().String(), target: target, hook: hook, conn: conn}
	p.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(p.forward))
	go p.srv.Serve(lis)
	return p, nil
}

// Stop closes the proxy and its open calls.
func (p *Proxy) Stop() {
	p.stop.Do(func() {
		p.srv.Stop()
		p.mu.Lock()
		p.conn.Close()
		p.mu.Unlock()
	})
}

// connection returns the connection for a new call, as a client dialling
// the target now would have it. After the target went away, gRPC holds a
// connection in backoff and fails every call at once with the error of its
// last attempt, though the target may be back (a restarted job server): a
// connection in that state is replaced by a fresh one, which reaches a
// target that is back and fails fast on one still down.
func (p *Proxy) connection() (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn.GetState() != connectivity.TransientFailure {
		return p.conn, nil
	}
	conn, err := dial(p.target)
	if err != nil {
		return nil, err
	}
	p.conn.Close()
	p.conn = conn
	return conn, nil
}

func dial(target string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("grpcproxy: dial %s: %w", target, err)
	}
	return conn, nil
}

// forward relays one call, of any kind, to the target.
func (p *Proxy) forward(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return errors.New("grpcproxy: no method")
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	conn, err := p.connection()
	if err != nil {
		return err
	}
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	up := make(chan error, 1)
	go func() {
		for {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				if errors.Is(err, io.EOF) {
					up <- cs.CloseSend()
				} else {
					up <- err
				}
				return
			}
			if f.b, err = p.hook(method, true, f.b); err != nil {
				up <- err
				return
			}
			if err := cs.SendMsg(&f); err != nil {
				up <- nil // the target's status comes from RecvMsg below
				return
			}
		}
	}()
	for {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if f.b, err = p.hook(method, false, f.b); err != nil {
			return err
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
		select {
		case err := <-up:
			if err != nil {
				return err
			}
		default:
		}
	}
}

// frame is one gRPC message, undecoded.
type frame struct{ b []byte }

// rawCodec passes frames through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

// Name is "proto", so the content type on the wire stays what both ends
// expect.
func (rawCodec) Name() string { return "proto" }
