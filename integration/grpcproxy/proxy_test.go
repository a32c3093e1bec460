package grpcproxy

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/localport"
)

// serveHealth serves the gRPC health service on addr until the test ends
// or the returned stop is called.
func serveHealth(t *testing.T, addr string) (stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return srv.Stop
}

// TestRelayReachesARestartedTarget: a call made through the proxy right
// after its target came back on the same port reaches it, although the
// proxy's connection failed to reconnect while the target was down (a
// restarted Flink job server, whose first Prepare failed with the stale
// "connection refused"); and while the target is down a call fails fast,
// as a fresh client's would, instead of waiting for it (a submitter that
// asks for the metrics of a job whose job server died).
func TestRelayReachesARestartedTarget(t *testing.T) {
	ports, err := localport.Reserve(1)
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	stop := serveHealth(t, target)
	p, err := Start(target, func(_ string, _ bool, msg []byte) ([]byte, error) { return msg, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := healthpb.NewHealthClient(conn)
	check := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(10 * time.Second); err != nil {
		t.Fatalf("through the proxy to a running target: %v", err)
	}
	stop()
	for range 2 { // the first call sees the connection break, the second the backoff
		if err := check(10 * time.Second); status.Code(err) != codes.Unavailable {
			t.Fatalf("a call through the proxy to a stopped target: %v, want Unavailable at once", err)
		}
	}
	serveHealth(t, target)
	start := time.Now()
	if err := check(10 * time.Second); err != nil {
		t.Fatalf("through the proxy to the target restarted on %s: %v", target, err)
	}
	t.Logf("the first call after the restart was answered in %v", time.Since(start).Round(time.Millisecond))
}
