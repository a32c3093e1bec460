package connection

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// credentialHeaders are the metadata keys through which Google clients send
// credentials: OAuth or self-signed JWT bearer tokens, API keys, and IAM
// delegation tokens.
var credentialHeaders = []string{"authorization", "x-goog-api-key", "x-goog-iam-authorization-token", "x-goog-iam-authority-selector"}

// withApplicationDefaultCredentials points application-default credentials
// at a well-formed service-account key, so that a client that consults ADC
// finds credentials to send.
func withApplicationDefaultCredentials(t *testing.T) {
	t.Helper()
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(t, marshal(t, fakeServiceAccountKey(t))))
}

// carriedCredentials lists what in md carries or reveals credentials: a
// credential header, or any value naming the fake key's identity.
func carriedCredentials(md metadata.MD) []string {
	var found []string
	for _, h := range credentialHeaders {
		if len(md.Get(h)) > 0 {
			found = append(found, h)
		}
	}
	for k, vs := range md {
		for _, v := range vs {
			for _, secret := range []string{fakeClientEmail, fakePrivateKeyID, fakeClientID} {
				if strings.Contains(v, secret) {
					found = append(found, k+" names "+secret)
				}
			}
		}
	}
	return found
}

// exerciseClient issues one RPC of each kind a pipeline makes: an admin
// call (GetTopic, as the sink's repair and the source's prepare step do), a
// publish (the sink, the dead-letter writer) and a streaming pull (the
// source). Each is bounded by timeout; their errors are returned in that
// order.
func exerciseClient(t *testing.T, c *pubsub.Client, timeout time.Duration) (getTopic, publish, pull error) {
	t.Helper()
	getTopic = getTopicOnce(t, c, timeout)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pub := c.Publisher("projects/" + fakeProject + "/topics/t")
	pub.PublishSettings.Timeout = timeout
	_, publish = pub.Publish(ctx, &pubsub.Message{Data: []byte("x")}).Get(ctx)
	pub.Stop()

	// The streaming pull is opened through the admin client rather than
	// Subscriber.Receive, whose retries of a failing stream are not bounded
	// by its context; the RPC and the connection are the same.
	ctx, cancel = context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stream, err := c.SubscriptionAdminClient.StreamingPull(ctx)
	if err == nil {
		// A Send that finds the stream already ended by the server returns
		// io.EOF; the server's status comes from Recv either way.
		_ = stream.Send(&pubsubpb.StreamingPullRequest{Subscription: "projects/" + fakeProject + "/subscriptions/s", StreamAckDeadlineSeconds: 10})
		_, err = stream.Recv()
	}
	return getTopic, publish, err
}

// staticToken is per-RPC credentials that any transport may carry, for the
// control: the recording server must see a credential that is sent.
type staticToken struct{}

func (staticToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer control-token"}, nil
}
func (staticToken) RequireTransportSecurity() bool { return false }

// TestTrapSeesCredentials is the control for the tests below: a call that
// does carry a bearer token is recorded as carrying one. Without it, "no
// credentials were seen" could mean the server cannot see them.
func TestTrapSeesCredentials(t *testing.T) {
	tr := newTrap(t)
	conn, err := grpc.NewClient(tr.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(staticToken{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = conn.Invoke(ctx, "/google.pubsub.v1.Publisher/GetTopic", &pubsubpb.GetTopicRequest{Topic: "projects/p/topics/t"}, &pubsubpb.Topic{})
	if !tr.reached(err) {
		t.Fatalf("GetTopic = %v, want the trap's answer", err)
	}
	md := tr.receivedMetadata()
	if len(md) != 1 || len(carriedCredentials(md[0])) == 0 {
		t.Fatalf("the trap recorded %v, want one call carrying the control token", md)
	}
}

// TestEmulatorEndpointCarriesNoCredentials: with EmulatorEndpoint set, not
// one RPC of any kind carries credentials, even where application-default
// credentials exist and would be found by a client that looked for them.
func TestEmulatorEndpointCarriesNoCredentials(t *testing.T) {
	withApplicationDefaultCredentials(t)
	t.Setenv(envVar, deadAddr(t))
	tr := newTrap(t)
	c, err := NewClient(context.Background(), fakeProject, Settings{EmulatorEndpoint: tr.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	getTopic, publish, pull := exerciseClient(t, c, 10*time.Second)
	for name, err := range map[string]error{"GetTopic": getTopic, "Publish": publish, "StreamingPull": pull} {
		if !tr.reached(err) {
			t.Errorf("%s = %v, want the answer of the server at EmulatorEndpoint", name, err)
		}
	}
	calls := tr.receivedMetadata()
	if len(calls) < 3 {
		t.Fatalf("the emulator endpoint saw %d calls, want at least 3 (admin, publish, pull)", len(calls))
	}
	for i, md := range calls {
		if found := carriedCredentials(md); len(found) > 0 {
			t.Errorf("call %d to the emulator carried credentials: %v", i, found)
		}
	}
	t.Logf("%d calls to the emulator endpoint, none with credentials", len(calls))
}

// TestEnvNeverRedirectsProduction: with PUBSUB_EMULATOR_HOST pointing at a
// live gRPC server and credentials found through application-default
// credentials (no CredentialsFile), no RPC of any kind reaches that server:
// the connections go to production Pub/Sub, unreachable from here.
func TestEnvNeverRedirectsProduction(t *testing.T) {
	withApplicationDefaultCredentials(t)
	tr := newTrap(t)
	t.Setenv(envVar, tr.addr)
	c, err := NewClient(context.Background(), fakeProject, Settings{})
	if err != nil {
		t.Fatalf("NewClient with application-default credentials: %v", err)
	}
	defer c.Close()
	getTopic, publish, pull := exerciseClient(t, c, 3*time.Second)
	for name, err := range map[string]error{"GetTopic": getTopic, "Publish": publish, "StreamingPull": pull} {
		if tr.reached(err) {
			t.Errorf("%s was answered by the %s server", name, envVar)
		}
	}
	if n := tr.accepted.Load(); n != 0 {
		t.Fatalf("the %s server accepted %d connections, want 0", envVar, n)
	}
	t.Logf("GetTopic: %v; Publish: %v; StreamingPull: %v", getTopic, publish, pull)
}

// TestEnvNeverRedirectsEmulator: with PUBSUB_EMULATOR_HOST pointing at a
// live gRPC server and EmulatorEndpoint at a pstest server, messages are
// published to and pulled from pstest, and the other server is never
// connected to.
func TestEnvNeverRedirectsEmulator(t *testing.T) {
	tr := newTrap(t)
	t.Setenv(envVar, tr.addr)
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c, err := NewClient(ctx, "emulated", Settings{EmulatorEndpoint: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/emulated/topics/orders"})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	sub, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: "projects/emulated/subscriptions/orders", Topic: topic.Name})
	if err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	pub := c.Publisher(topic.Name)
	id, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("order-1")}).Get(ctx)
	pub.Stop()
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	var got string
	rctx, stop := context.WithCancel(ctx)
	err = c.Subscriber(sub.Name).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		got = m.ID
		m.Ack()
		stop()
	})
	if err != nil || got != id {
		t.Fatalf("Receive = %v, received message %q, want %q from pstest", err, got, id)
	}
	if n := tr.accepted.Load(); n != 0 {
		t.Fatalf("the %s server accepted %d connections, want 0", envVar, n)
	}
}
