package crash

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
)

// DeliveryCounter is a gRPC proxy for Pub/Sub's Subscriber service in front
// of the emulator. It forwards the calls a read makes and records the
// distinct message IDs its streaming pulls delivered, and when each was
// first acked (on a stream or with the Acknowledge RPC). It is how a test
// knows, from the server's side and without a sleep, that a pipeline
// process has received its whole backlog, and when the read let each
// message go: the emulator itself reports nothing of the sort.
type DeliveryCounter struct {
	pubsubpb.UnimplementedSubscriberServer
	upstream pubsubpb.SubscriberClient
	Endpoint string // host:port the read connects to (crashpipeline's --read_emulator)

	mu        sync.Mutex
	delivered map[string]bool
	ackIDs    map[string]string    // ack ID -> message ID, of every delivery
	acked     map[string]time.Time // message ID -> first ack sent
	answers   AckAnswers
	changed   chan struct{}
}

// AckAnswers counts, by ack ID, how the emulator answered the Acknowledge
// calls: taken (the call succeeded), refused (named in the error's
// ErrorInfo metadata, as exactly-once delivery names an expired or
// superseded ack ID), or failed with the call.
type AckAnswers struct {
	Taken, Refused, Failed int
}

// StartDeliveryCounter serves a DeliveryCounter for emulatorEndpoint on a
// free loopback port until the test ends.
func StartDeliveryCounter(t testing.TB, emulatorEndpoint string) *DeliveryCounter {
	t.Helper()
	conn, err := grpc.NewClient(emulatorEndpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("delivery counter: dial emulator %s: %v", emulatorEndpoint, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("delivery counter: listen: %v", err)
	}
	d := &DeliveryCounter{
		upstream:  pubsubpb.NewSubscriberClient(conn),
		Endpoint:  lis.Addr().String(),
		delivered: map[string]bool{},
		ackIDs:    map[string]string{},
		acked:     map[string]time.Time{},
		changed:   make(chan struct{}),
	}
	srv := grpc.NewServer()
	pubsubpb.RegisterSubscriberServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		_ = conn.Close()
	})
	return d
}

// Reset forgets what was delivered (before a new pipeline process starts).
func (d *DeliveryCounter) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.delivered = map[string]bool{}
}

// AwaitDelivered waits until n distinct messages were delivered since the
// last reset or timeout passes, and returns how many were.
func (d *DeliveryCounter) AwaitDelivered(n int, timeout time.Duration) int {
	return awaitAtLeast(n, timeout, func() (int, <-chan struct{}) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.delivered), d.changed
	})
}

// Acked returns when each message was first acked, by message ID.
func (d *DeliveryCounter) Acked() map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.acked)
}

// note records the messages of one streaming-pull response.
func (d *DeliveryCounter) note(msgs []*pubsubpb.ReceivedMessage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range msgs {
		d.delivered[m.GetMessage().GetMessageId()] = true
		d.ackIDs[m.GetAckId()] = m.GetMessage().GetMessageId()
	}
	close(d.changed)
	d.changed = make(chan struct{})
}

// noteAcks records acks sent now.
func (d *DeliveryCounter) noteAcks(ackIDs []string) {
	if len(ackIDs) == 0 {
		return
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ackIDs {
		if msg, ok := d.ackIDs[id]; ok {
			if _, seen := d.acked[msg]; !seen {
				d.acked[msg] = now
			}
		}
	}
	close(d.changed)
	d.changed = make(chan struct{})
}

// AwaitAcked waits until n distinct messages were acked or timeout passes,
// and returns how many were.
func (d *DeliveryCounter) AwaitAcked(n int, timeout time.Duration) int {
	return awaitAtLeast(n, timeout, func() (int, <-chan struct{}) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.acked), d.changed
	})
}

// StreamingPull relays one stream both ways. When the pipeline process
// dies, its side's context ends, which cancels the emulator's side: the
// emulator sees what it would see from the dead process itself.
func (d *DeliveryCounter) StreamingPull(down pubsubpb.Subscriber_StreamingPullServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	up, err := d.upstream.StreamingPull(ctx)
	if err != nil {
		return err
	}
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				_ = up.CloseSend()
				return
			}
			d.noteAcks(req.GetAckIds())
			if err := up.Send(req); err != nil {
				return
			}
		}
	}()
	for {
		resp, err := up.Recv()
		if errors.Is(err, io.EOF) {
			// The emulator ended the stream cleanly; so does the proxy,
			// which the client takes as a stream to reopen (returning
			// io.EOF would reach it as an error of code Unknown, which
			// fails its Receive).
			return nil
		}
		if err != nil {
			return err
		}
		d.note(resp.GetReceivedMessages())
		if err := down.Send(resp); err != nil {
			return err
		}
	}
}

// GetSubscription forwards the call to the emulator.
func (d *DeliveryCounter) GetSubscription(ctx context.Context, req *pubsubpb.GetSubscriptionRequest) (*pubsubpb.Subscription, error) {
	return d.upstream.GetSubscription(ctx, req)
}

// Acknowledge records the acks, forwards the call to the emulator and
// records its answer.
func (d *DeliveryCounter) Acknowledge(ctx context.Context, req *pubsubpb.AcknowledgeRequest) (*emptypb.Empty, error) {
	d.noteAcks(req.GetAckIds())
	resp, err := d.upstream.Acknowledge(ctx, req)
	refused := 0
	if ae, ok := apierror.FromError(err); ok {
		for _, id := range req.GetAckIds() {
			if _, named := ae.Metadata()[id]; named {
				refused++
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch n := len(req.GetAckIds()); {
	case err == nil:
		d.answers.Taken += n
	case refused > 0:
		d.answers.Refused += refused
		d.answers.Taken += n - refused
	default:
		d.answers.Failed += n
	}
	close(d.changed)
	d.changed = make(chan struct{})
	return resp, err
}

// AwaitAnswers waits until the emulator answered acks of n ack IDs or
// timeout passes, and returns its answers so far.
func (d *DeliveryCounter) AwaitAnswers(n int, timeout time.Duration) AckAnswers {
	awaitAtLeast(n, timeout, func() (int, <-chan struct{}) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.answers.Taken + d.answers.Refused + d.answers.Failed, d.changed
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.answers
}

// ModifyAckDeadline forwards the call to the emulator.
func (d *DeliveryCounter) ModifyAckDeadline(ctx context.Context, req *pubsubpb.ModifyAckDeadlineRequest) (*emptypb.Empty, error) {
	return d.upstream.ModifyAckDeadline(ctx, req)
}

// Pull forwards the call to the emulator.
func (d *DeliveryCounter) Pull(ctx context.Context, req *pubsubpb.PullRequest) (*pubsubpb.PullResponse, error) {
	return d.upstream.Pull(ctx, req)
}
