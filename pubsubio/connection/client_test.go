package connection

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const envVar = "PUBSUB_EMULATOR_HOST"

// deadAddr returns a loopback address nothing listens on: a port reserved
// and released, so a connection to it is refused at once.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// silentAddr returns a loopback address that accepts connections and never
// sends a byte.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// trap is a loopback gRPC server that counts the connections it accepts and
// answers every RPC with trapMessage. Because it answers, an RPC that reached
// it can only return after its connection was counted: the RPC returning is
// the synchronization point, no sleep needed.
type trap struct {
	addr       string
	accepted   atomic.Int64
	authorized atomic.Int64 // RPCs that carried an authorization header

	mu       sync.Mutex
	received []metadata.MD // every RPC's incoming metadata, in arrival order
}

// receivedMetadata returns a copy of the metadata of every RPC the trap answered.
func (tr *trap) receivedMetadata() []metadata.MD {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.received)
}

const trapMessage = "answered by the PUBSUB_EMULATOR_HOST trap"

func newTrap(t *testing.T) *trap {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{addr: l.Addr().String()}
	// FailedPrecondition, because the GAPIC clients do not retry it.
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		if len(md.Get("authorization")) > 0 {
			tr.authorized.Add(1)
		}
		tr.mu.Lock()
		tr.received = append(tr.received, md.Copy())
		tr.mu.Unlock()
		return status.Error(codes.FailedPrecondition, trapMessage)
	}))
	go srv.Serve(countingListener{l, &tr.accepted})
	t.Cleanup(srv.Stop)
	return tr
}

// reached reports whether err is the trap's answer.
func (tr *trap) reached(err error) bool {
	return status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), trapMessage)
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// getTopicOnce issues one GetTopic RPC, without the client's retries, which
// would only stretch a failing call to the deadline.
func getTopicOnce(t *testing.T, c *pubsub.Client, timeout time.Duration) error {
	t.Helper()
	c.TopicAdminClient.CallOptions.GetTopic = nil
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: "projects/" + fakeProject + "/topics/t"})
	return err
}

// TestStockClientFollowsEnv is the control for TestProductionIgnoresEnv: it
// shows that the trap catches what the client does on its own when the
// variable is set. If it ever fails, the client changed and the other tests
// no longer prove anything.
func TestStockClientFollowsEnv(t *testing.T) {
	tr := newTrap(t)
	t.Setenv(envVar, tr.addr)
	c, err := pubsub.NewClient(context.Background(), fakeProject)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = getTopicOnce(t, c, 10*time.Second)
	if !tr.reached(err) {
		t.Fatalf("GetTopic = %v, want the trap's answer", err)
	}
	// At least the publisher's connection; the subscriber's may or may not
	// have been accepted yet.
	if n := tr.accepted.Load(); n < 1 {
		t.Errorf("trap accepted %d connections, want at least 1", n)
	}
}

// TestOptionOrderingIsNotEnough is the control for the design: passing the
// production endpoint and credentials as options, after the ones the emulator
// hook adds, overrides the address but not the hook's plaintext transport and
// WithoutAuthentication. The trap stands in for production: it speaks
// plaintext gRPC, so answering at all proves the client did not use TLS.
func TestOptionOrderingIsNotEnough(t *testing.T) {
	tr := newTrap(t)
	t.Setenv(envVar, deadAddr(t))
	key := writeKeyFile(t, marshal(t, fakeServiceAccountKey(t)))
	c, err := pubsub.NewClient(context.Background(), fakeProject,
		option.WithEndpoint(tr.addr),
		option.WithAuthCredentialsFile(option.ServiceAccount, key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := getTopicOnce(t, c, 10*time.Second); !tr.reached(err) {
		t.Fatalf("GetTopic = %v, want the answer of the plaintext server at the WithEndpoint address", err)
	}
	if n := tr.authorized.Load(); n != 0 {
		t.Errorf("%d RPCs carried credentials, want 0 (the hook disables them)", n)
	}
}

// TestEmulatorEndpointOverridesEnv: with the variable pointing at a dead
// port, an explicit EmulatorEndpoint is still the one used, end to end.
func TestEmulatorEndpointOverridesEnv(t *testing.T) {
	t.Setenv(envVar, deadAddr(t))
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, "emulated", Settings{EmulatorEndpoint: srv.Addr})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	topic, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/emulated/topics/orders"})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	pub := c.Publisher(topic.Name)
	id, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("order-1")}).Get(ctx)
	pub.Stop()
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	msgs := srv.Messages()
	if len(msgs) != 1 || msgs[0].ID != id || !bytes.Equal(msgs[0].Data, []byte("order-1")) {
		t.Fatalf("pstest saw %+v, want one message %q with ID %q", msgs, "order-1", id)
	}
}

// TestProductionIgnoresEnv: with no EmulatorEndpoint, a client goes to
// production Pub/Sub even when the variable points at a live listener.
func TestProductionIgnoresEnv(t *testing.T) {
	tr := newTrap(t)
	t.Setenv(envVar, tr.addr)
	s := Settings{CredentialsFile: writeKeyFile(t, marshal(t, fakeServiceAccountKey(t)))}

	c, err := NewClient(context.Background(), fakeProject, s)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer c.Close()
	// Production is unreachable from here, so the RPC fails; what matters is
	// where it did not go.
	err = getTopicOnce(t, c, 5*time.Second)
	if err == nil {
		t.Fatal("GetTopic succeeded without network or real credentials")
	}
	t.Logf("GetTopic: %v", err)
	if tr.reached(err) {
		t.Fatalf("GetTopic was answered by the %s listener", envVar)
	}
	if n := tr.accepted.Load(); n != 0 {
		t.Fatalf("%s listener accepted %d connections, want 0", envVar, n)
	}

	// The same, one level down: the connection targets production.
	conn, err := Dial(context.Background(), s)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer conn.Close()
	if got := conn.Target(); got != ProductionEndpoint {
		t.Errorf("Dial target = %q, want %q", got, ProductionEndpoint)
	}
}

// TestEmulatorConnectionIsPlaintextToEndpoint checks the emulator path one
// level down, and that the trap would catch a client aimed at it.
func TestEmulatorConnectionIsPlaintextToEndpoint(t *testing.T) {
	tr := newTrap(t)
	t.Setenv(envVar, deadAddr(t))
	c, err := NewClient(context.Background(), fakeProject, Settings{EmulatorEndpoint: tr.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := getTopicOnce(t, c, 10*time.Second); !tr.reached(err) {
		t.Fatalf("GetTopic = %v, want the answer of the server at EmulatorEndpoint", err)
	}
	if n := tr.authorized.Load(); n != 0 {
		t.Errorf("%d RPCs to the emulator carried credentials, want 0", n)
	}

	conn, err := Dial(context.Background(), Settings{EmulatorEndpoint: "localhost:8085"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got, want := conn.Target(), "dns:///localhost:8085"; got != want {
		t.Errorf("Dial target = %q, want %q", got, want)
	}
}

func TestDialRejectsInvalidSettings(t *testing.T) {
	for _, s := range []Settings{
		{EmulatorEndpoint: "localhost"},
		{EmulatorEndpoint: "localhost:8085", CredentialsFile: "/k.json"},
	} {
		if _, err := NewClient(context.Background(), fakeProject, s); err == nil {
			t.Errorf("NewClient(%+v) succeeded, want the Validate error", s)
		}
	}
}
