package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The service shape's flags. Their defaults are Pub/Sub's documented
// figures, or for the round trip a worker's in the service's region;
// BENCHMARKS.md, "The server's shape", says where each comes from.
var (
	satShapeName   = flag.String("sat_shape", "service", "the saturation server's shape: service (a round trip on every RPC, a throughput cap per streaming pull and the publish request limits, --sat_rtt and --sat_stream_bytes) or ideal (none: as fast as flow control and acks allow)")
	satRTT         = flag.Duration("sat_rtt", 2*time.Millisecond, "the service shape's round trip: every unary RPC is answered this much later, and an ack sent on a stream takes effect this much later")
	satStreamBytes = flag.Int("sat_stream_bytes", 10_000_000, "the service shape's bytes per second one streaming pull carries at most")
)

// Pub/Sub's limits on one Publish request.
const (
	maxPublishMessages = 1000
	maxPublishBytes    = 10_000_000
)

// satShape is what separates the saturation server from an ideal one. The
// zero value is the ideal server. Redelivery of what is not acked within
// its lease is part of every shape (satServer.expireLeases).
type satShape struct {
	rtt         time.Duration // added to every RPC's answer and to every ack on a stream
	streamBytes int           // per second per streaming pull; 0: no cap
	limits      bool          // refuse Publish requests over Pub/Sub's limits
}

// shapeFromFlags is the shape --sat_shape names.
func shapeFromFlags() (satShape, error) {
	switch *satShapeName {
	case "ideal":
		return satShape{}, nil
	case "service":
		if *satRTT < 0 || *satStreamBytes < 0 {
			return satShape{}, fmt.Errorf("--sat_rtt %v and --sat_stream_bytes %d must not be negative", *satRTT, *satStreamBytes)
		}
		return satShape{rtt: *satRTT, streamBytes: *satStreamBytes, limits: true}, nil
	}
	return satShape{}, fmt.Errorf("--sat_shape %q: use service or ideal", *satShapeName)
}

// shapeArgs are the flags that give the server process this process's shape.
func shapeArgs() []string {
	return []string{"--sat_shape=" + *satShapeName, "--sat_rtt=" + satRTT.String(), fmt.Sprintf("--sat_stream_bytes=%d", *satStreamBytes)}
}

func (sh satShape) String() string {
	if sh == (satShape{}) {
		return "ideal server"
	}
	return fmt.Sprintf("service shape: %v round trip, %.1f MB/s per stream, Publish at most %d messages and %d MB", sh.rtt, float64(sh.streamBytes)/1e6, maxPublishMessages, maxPublishBytes/1_000_000)
}

// delayUnary answers every unary RPC one round trip after it arrived.
func (sh satShape) delayUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := sleepCtx(ctx, sh.rtt); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return handler(ctx, req)
}

// checkPublish refuses a request over Pub/Sub's limits, as the service does.
func (sh satShape) checkPublish(n int, req proto.Message) error {
	if !sh.limits {
		return nil
	}
	if n > maxPublishMessages {
		return status.Errorf(codes.InvalidArgument, "a Publish request carries %d messages; the limit is %d", n, maxPublishMessages)
	}
	if size := proto.Size(req); size > maxPublishBytes {
		return status.Errorf(codes.InvalidArgument, "a Publish request is %d bytes; the limit is %d", size, maxPublishBytes)
	}
	return nil
}

// afterRoundTrip runs f one round trip from now: an ack sent on a stream
// frees its flow control only when it reaches the server, and the delivery
// it answers took the other half of the trip.
func (sh satShape) afterRoundTrip(f func()) {
	if sh.rtt == 0 {
		f()
		return
	}
	time.AfterFunc(sh.rtt, f)
}

// pacer holds one stream to the shape's bytes per second.
type pacer struct {
	rate int
	next time.Time
}

// wait blocks until the stream may send again.
func (p *pacer) wait(ctx context.Context) error {
	if p.rate == 0 {
		return nil
	}
	return sleepCtx(ctx, time.Until(p.next))
}

// sent charges the stream for bytes just sent.
func (p *pacer) sent(bytes int) {
	if p.rate == 0 {
		return
	}
	if now := time.Now(); p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(bytes) / float64(p.rate) * float64(time.Second)))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
