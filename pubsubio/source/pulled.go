package source

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
)

// streamingPullMethod is the RPC whose responses pulled records.
const streamingPullMethod = "/google.pubsub.v1.Subscriber/StreamingPull"

// pulled records the messages a split's streaming pulls received that the
// client has not yet handed to the split, so that a stopped subscriber can
// give them back with the RPC.
//
// The client holds what it pulled beyond its flow control in an inventory
// it leases but does not deliver. Stopping the subscriber leaves that
// inventory to the client's own shutdown nack, which races Receive
// returning and is not guaranteed to reach Pub/Sub (pinned on pstest by
// TestStoppedSubscriberGivesBackWhatItNeverDelivered). Only the split's
// connection sees those ack IDs, so an interceptor on it records every
// one, the split forgets those handed to it, and what is left when Receive
// returns is nacked. What the server assigned to the stream and the client
// never read cannot be given back: it returns when its lease lapses (on the
// emulator, minutes later; docs/limits.md, Known limits).
type pulled struct {
	timestampAttribute string // Config.TimestampAttribute, for event times
	// health records the streams' failures and responses (health.go).
	health streamHealth
	// exactlyOnce is the subscription's exactly-once delivery setting as
	// the streams' responses (and describes) last stated it: the client
	// reads it from the same responses, before it hands their messages on.
	exactlyOnce setting

	mu   sync.Mutex
	msgs map[string]pulledMessage // by message ID
}

// pulledMessage is what a give-back needs of a message pulled and not
// handed over: its ack ID, and its event time for the watermark.
type pulledMessage struct {
	ackID     string
	eventTime time.Time
}

func newPulled(timestampAttribute string) *pulled {
	return &pulled{timestampAttribute: timestampAttribute, msgs: map[string]pulledMessage{}}
}

// interceptor wraps the connection's streaming pulls to record what they
// receive.
func (p *pulled) interceptor() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if method != streamingPullMethod {
			return s, err
		}
		if err != nil {
			p.health.failed(err, time.Now())
			return s, err
		}
		return &recordingStream{ClientStream: s, pulled: p}, nil
	})
}

type recordingStream struct {
	grpc.ClientStream
	pulled *pulled
}

func (s *recordingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.pulled.health.failed(err, time.Now())
		return err
	}
	if resp, ok := m.(*pubsubpb.StreamingPullResponse); ok {
		if props := resp.GetSubscriptionProperties(); props != nil {
			s.pulled.exactlyOnce.set(props.GetExactlyOnceDeliveryEnabled())
		}
		s.pulled.health.answered()
		s.pulled.add(resp.GetReceivedMessages())
	}
	return err
}

func (p *pulled) add(msgs []*pubsubpb.ReceivedMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		msg := m.GetMessage()
		publish := msg.GetPublishTime().AsTime()
		t, err := eventTime(p.timestampAttribute, msg.GetAttributes(), publish)
		if err != nil {
			t = publish
		}
		p.msgs[msg.GetMessageId()] = pulledMessage{ackID: m.GetAckId(), eventTime: t}
	}
}

// setting is a subscription's boolean setting as last seen, or unknown.
type setting struct{ v atomic.Int32 } // 0 unknown, 1 off, 2 on

func (s *setting) set(on bool) {
	if on {
		s.v.Store(2)
	} else {
		s.v.Store(1)
	}
}

func (s *setting) get() (on, known bool) {
	v := s.v.Load()
	return v == 2, v != 0
}

// handedOver forgets a message the split took responsibility for.
func (p *pulled) handedOver(messageID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.msgs, messageID)
}

// take returns and forgets everything not handed over, by message ID.
func (p *pulled) take() map[string]pulledMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.msgs
	p.msgs = map[string]pulledMessage{}
	return out
}
