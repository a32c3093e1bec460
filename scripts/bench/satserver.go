package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// satServer is the saturation cases' Pub/Sub: the parts of the Publisher
// and Subscriber services the contenders use, in memory, as fast as a
// stream's flow control and its client's acks allow. It is a benchmark
// instrument, never a test double: the emulator and pstest stand for
// Pub/Sub's semantics in the tests. What it keeps of them is what a reader
// could otherwise skip: every delivery has its own ack ID, a lease that
// expires after the stream's ack deadline (the message is then delivered
// again), nacks and lease extensions honoured, and every ack counted per
// message (satStats).
type satServer struct {
	pubsubpb.UnimplementedPublisherServer
	pubsubpb.UnimplementedSubscriberServer

	shape  satShape
	mu     sync.Mutex
	topics map[string]*satTopic
	subs   map[string]*satSub
	nextID int64
}

type satTopic struct {
	name string
	subs []*satSub
}

// satSub is one subscription: what waits for delivery, what is leased, and
// the acks per message. One lock; its cond wakes the subscription's
// streams whenever a message or flow-control room appears.
type satSub struct {
	name        string
	topic       string // guarded by satServer.mu
	ackDeadline time.Duration
	mu          sync.Mutex
	cond        *sync.Cond
	msgs        []*pubsubpb.PubsubMessage // every message published to it, by index
	sizes       []int                     // their encoded sizes, for flow control
	ready       []int                     // indexes waiting for delivery, in order
	leases      map[string]*satLease      // ack ID -> delivery
	acks        []uint8                   // acks per message (saturating)
	ackedAt     []time.Time               // each message's first ack
	nextAck     uint64
	stats       satStats
}

type satLease struct {
	msg      int
	expires  time.Time
	stream   *satStream
	received int // the message's bytes, for the stream's flow control
}

// satStream is one streaming pull's flow control: what it has outstanding
// against the limits its client asked for.
type satStream struct {
	maxMsgs, msgs   int
	maxBytes, bytes int
}

func (s *satStream) room(size int) bool {
	if s.msgs == 0 {
		return true // a message larger than the byte limit still goes out alone
	}
	return (s.maxMsgs <= 0 || s.msgs < s.maxMsgs) && (s.maxBytes <= 0 || s.bytes+size <= s.maxBytes)
}

// satStats is what a subscription saw, read by the bench after each run.
type satStats struct {
	Published    int   `json:"published"`
	Acked        int   `json:"acked"`         // messages acked at least once
	AckedTwice   int   `json:"acked_twice"`   // messages acked more than once
	Unacked      int   `json:"unacked"`       // messages never acked
	Deliveries   int   `json:"deliveries"`    // messages sent on streams
	Expired      int   `json:"expired"`       // leases that ran out: delivered again
	Nacks        int   `json:"nacks"`         // leases given back with deadline 0
	Extensions   int   `json:"extensions"`    // lease extensions
	StaleAcks    int   `json:"stale_acks"`    // acks of unknown or expired ack IDs
	Outstanding  int   `json:"outstanding"`   // leases held at the time of reading
	AckRequests  int   `json:"ack_requests"`  // Acknowledge calls
	PullStreams  int   `json:"pull_streams"`  // StreamingPull calls
	PublishCalls int   `json:"publish_calls"` // Publish calls (per topic: on every subscription of it)
	FirstPublish int64 `json:"first_publish"` // when the first Publish call arrived, Unix ns
	LastPublish  int64 `json:"last_publish"`  // when the last Publish call arrived, Unix ns

	// When the first and the last delivery went out, Unix ns.
	FirstDelivery int64 `json:"first_delivery"`
	LastDelivery  int64 `json:"last_delivery"`
	// When the last ack of a message not acked before arrived, Unix ns.
	LastAck int64 `json:"last_ack"`

	// From publish to first ack, over the messages acked (the largest of
	// several subscriptions when summed).
	AckLatencyP50 time.Duration `json:"ack_latency_p50"`
	AckLatencyP99 time.Duration `json:"ack_latency_p99"`
}

// maxResponseBytes keeps a StreamingPull response under gRPC's default
// 4 MiB message limit.
const maxResponseBytes = 3 << 20

func newSatServer(shape satShape) *satServer {
	s := &satServer{shape: shape, topics: map[string]*satTopic{}, subs: map[string]*satSub{}}
	go s.expireLeases()
	return s
}

func (s *satServer) CreateTopic(_ context.Context, t *pubsubpb.Topic) (*pubsubpb.Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.topics[t.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "topic %s exists", t.Name)
	}
	s.topics[t.Name] = &satTopic{name: t.Name}
	return t, nil
}

func (s *satServer) GetTopic(_ context.Context, r *pubsubpb.GetTopicRequest) (*pubsubpb.Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.topics[r.Topic]; !ok {
		return nil, status.Errorf(codes.NotFound, "topic %s", r.Topic)
	}
	return &pubsubpb.Topic{Name: r.Topic}, nil
}

func (s *satServer) DeleteTopic(_ context.Context, r *pubsubpb.DeleteTopicRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[r.Topic]; ok {
		for _, ss := range t.subs {
			ss.topic = "_deleted-topic_" // as Pub/Sub names it
		}
	}
	delete(s.topics, r.Topic)
	return &emptypb.Empty{}, nil
}

func (s *satServer) CreateSubscription(_ context.Context, sub *pubsubpb.Subscription) (*pubsubpb.Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[sub.Topic]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "topic %s", sub.Topic)
	}
	if _, ok := s.subs[sub.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "subscription %s exists", sub.Name)
	}
	if sub.AckDeadlineSeconds == 0 {
		sub.AckDeadlineSeconds = 10
	}
	ss := &satSub{name: sub.Name, topic: sub.Topic, ackDeadline: time.Duration(sub.AckDeadlineSeconds) * time.Second, leases: map[string]*satLease{}}
	ss.cond = sync.NewCond(&ss.mu)
	s.subs[sub.Name] = ss
	t.subs = append(t.subs, ss)
	return sub, nil
}

func (s *satServer) GetSubscription(_ context.Context, r *pubsubpb.GetSubscriptionRequest) (*pubsubpb.Subscription, error) {
	ss, err := s.sub(r.Subscription)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &pubsubpb.Subscription{Name: ss.name, Topic: ss.topic, AckDeadlineSeconds: int32(ss.ackDeadline / time.Second)}, nil
}

func (s *satServer) DeleteSubscription(_ context.Context, r *pubsubpb.DeleteSubscriptionRequest) (*emptypb.Empty, error) {
	ss, err := s.sub(r.Subscription)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, r.Subscription)
	if t, ok := s.topics[ss.topic]; ok {
		t.subs = slices.DeleteFunc(t.subs, func(x *satSub) bool { return x == ss })
	}
	return &emptypb.Empty{}, nil
}

// Publish stores the messages on every subscription of the topic and
// answers.
func (s *satServer) Publish(_ context.Context, r *pubsubpb.PublishRequest) (*pubsubpb.PublishResponse, error) {
	if err := s.shape.checkPublish(len(r.Messages), r); err != nil {
		return nil, err
	}
	s.mu.Lock()
	t, ok := s.topics[r.Topic]
	if !ok {
		s.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "topic %s", r.Topic)
	}
	subs := append([]*satSub(nil), t.subs...)
	ids := make([]string, len(r.Messages))
	now := timestamppb.Now()
	stored := make([]*pubsubpb.PubsubMessage, len(r.Messages))
	for i, m := range r.Messages {
		s.nextID++
		ids[i] = strconv.FormatInt(s.nextID, 10)
		stored[i] = &pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey, MessageId: ids[i], PublishTime: now}
	}
	s.mu.Unlock()
	for _, ss := range subs {
		ss.mu.Lock()
		for _, m := range stored {
			ss.ready = append(ss.ready, len(ss.msgs))
			ss.msgs = append(ss.msgs, m)
			ss.sizes = append(ss.sizes, proto.Size(m))
			ss.acks = append(ss.acks, 0)
			ss.ackedAt = append(ss.ackedAt, time.Time{})
		}
		ss.stats.Published += len(stored)
		ss.stats.PublishCalls++
		ss.stats.LastPublish = now.AsTime().UnixNano()
		if ss.stats.FirstPublish == 0 {
			ss.stats.FirstPublish = ss.stats.LastPublish
		}
		ss.mu.Unlock()
		ss.cond.Broadcast()
	}
	return &pubsubpb.PublishResponse{MessageIds: ids}, nil
}

func (s *satServer) sub(name string) (*satSub, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.subs[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "subscription %s", name)
	}
	return ss, nil
}

// StreamingPull sends what the subscription has ready as fast as the
// stream's flow control and the shape's cap allow; acks and deadline
// changes may come on the stream or by RPC.
func (s *satServer) StreamingPull(stream pubsubpb.Subscriber_StreamingPullServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	ss, err := s.sub(first.Subscription)
	if err != nil {
		return err
	}
	st := &satStream{maxMsgs: int(first.MaxOutstandingMessages), maxBytes: int(first.MaxOutstandingBytes)}
	deadline := time.Duration(first.StreamAckDeadlineSeconds) * time.Second
	if deadline <= 0 {
		deadline = ss.ackDeadline
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() { // wake the sender when the stream ends
		<-ctx.Done()
		ss.mu.Lock()
		ss.cond.Broadcast()
		ss.mu.Unlock()
	}()
	go func() { // requests after the first: acks, deadline changes, keepalives
		defer cancel()
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			s.shape.afterRoundTrip(func() {
				ss.ack(r.AckIds)
				for i, id := range r.ModifyDeadlineAckIds {
					ss.modify([]string{id}, r.ModifyDeadlineSeconds[i])
				}
			})
		}
	}()
	ss.mu.Lock()
	ss.stats.PullStreams++
	ss.mu.Unlock()
	pace := &pacer{rate: s.shape.streamBytes}
	for {
		if err := pace.wait(ctx); err != nil {
			return status.FromContextError(err).Err()
		}
		resp := ss.take(ctx, st, deadline)
		if resp == nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		pace.sent(proto.Size(resp))
	}
}

// take waits until the subscription has a message ready and the stream has
// room, then leases as many as fit into one response; nil when ctx ends.
func (ss *satSub) take(ctx context.Context, st *satStream, deadline time.Duration) *pubsubpb.StreamingPullResponse {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for ctx.Err() == nil && (len(ss.ready) == 0 || !st.room(ss.sizes[ss.ready[0]])) {
		ss.cond.Wait()
	}
	if ctx.Err() != nil {
		return nil
	}
	resp := &pubsubpb.StreamingPullResponse{}
	expires := time.Now().Add(deadline)
	bytes := 0
	for len(ss.ready) > 0 {
		i := ss.ready[0]
		size := ss.sizes[i]
		if len(resp.ReceivedMessages) > 0 && (!st.room(size) || bytes+size > maxResponseBytes) {
			break
		}
		ss.ready = ss.ready[1:]
		ss.nextAck++
		id := strconv.FormatUint(ss.nextAck, 36)
		ss.leases[id] = &satLease{msg: i, expires: expires, stream: st, received: size}
		st.msgs++
		st.bytes += size
		bytes += size
		resp.ReceivedMessages = append(resp.ReceivedMessages, &pubsubpb.ReceivedMessage{AckId: id, Message: ss.msgs[i]})
	}
	ss.stats.Deliveries += len(resp.ReceivedMessages)
	now := time.Now().UnixNano()
	if ss.stats.FirstDelivery == 0 {
		ss.stats.FirstDelivery = now
	}
	ss.stats.LastDelivery = now
	return resp
}

// release ends a lease; the caller holds ss.mu.
func (ss *satSub) release(id string) (*satLease, bool) {
	l, ok := ss.leases[id]
	if !ok {
		return nil, false
	}
	delete(ss.leases, id)
	l.stream.msgs--
	l.stream.bytes -= l.received
	return l, true
}

func (ss *satSub) ack(ids []string) {
	if len(ids) == 0 {
		return
	}
	ss.mu.Lock()
	now := time.Now()
	for _, id := range ids {
		l, ok := ss.release(id)
		if !ok {
			ss.stats.StaleAcks++
			continue
		}
		if ss.acks[l.msg] == 0 {
			ss.ackedAt[l.msg] = now
			ss.stats.LastAck = now.UnixNano()
		}
		if ss.acks[l.msg] < 255 {
			ss.acks[l.msg]++
		}
	}
	ss.mu.Unlock()
	ss.cond.Broadcast()
}

// modify extends leases, or with seconds 0 gives them back for delivery.
func (ss *satSub) modify(ids []string, seconds int32) {
	ss.mu.Lock()
	for _, id := range ids {
		if seconds == 0 {
			if l, ok := ss.release(id); ok {
				ss.ready = append(ss.ready, l.msg)
				ss.stats.Nacks++
			}
			continue
		}
		if l, ok := ss.leases[id]; ok {
			l.expires = time.Now().Add(time.Duration(seconds) * time.Second)
			ss.stats.Extensions++
		}
	}
	ss.mu.Unlock()
	ss.cond.Broadcast()
}

func (s *satServer) Acknowledge(_ context.Context, r *pubsubpb.AcknowledgeRequest) (*emptypb.Empty, error) {
	ss, err := s.sub(r.Subscription)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	ss.stats.AckRequests++
	ss.mu.Unlock()
	ss.ack(r.AckIds)
	return &emptypb.Empty{}, nil
}

func (s *satServer) ModifyAckDeadline(_ context.Context, r *pubsubpb.ModifyAckDeadlineRequest) (*emptypb.Empty, error) {
	ss, err := s.sub(r.Subscription)
	if err != nil {
		return nil, err
	}
	ss.modify(r.AckIds, r.AckDeadlineSeconds)
	return &emptypb.Empty{}, nil
}

// expireLeases gives back, every 100 ms, what was leased past its deadline.
func (s *satServer) expireLeases() {
	for range time.Tick(100 * time.Millisecond) {
		s.mu.Lock()
		subs := make([]*satSub, 0, len(s.subs))
		for _, ss := range s.subs {
			subs = append(subs, ss)
		}
		s.mu.Unlock()
		now := time.Now()
		for _, ss := range subs {
			ss.mu.Lock()
			expired := 0
			for id, l := range ss.leases {
				if now.After(l.expires) {
					ss.release(id)
					ss.ready = append(ss.ready, l.msg)
					expired++
				}
			}
			ss.stats.Expired += expired
			ss.mu.Unlock()
			if expired > 0 {
				ss.cond.Broadcast()
			}
		}
	}
}

// statsOf is what the subscription saw so far.
func (s *satServer) statsOf(name string) (satStats, error) {
	ss, err := s.sub(name)
	if err != nil {
		return satStats{}, fmt.Errorf("stats: %w", err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	st := ss.stats
	var latencies []time.Duration
	for i, n := range ss.acks {
		if n > 0 {
			latencies = append(latencies, ss.ackedAt[i].Sub(ss.msgs[i].PublishTime.AsTime()))
		}
		switch {
		case n == 0:
			st.Unacked++
		case n == 1:
			st.Acked++
		default:
			st.Acked++
			st.AckedTwice++
		}
	}
	st.Outstanding = len(ss.leases)
	if len(latencies) > 0 {
		slices.Sort(latencies)
		st.AckLatencyP50 = latencies[len(latencies)/2]
		st.AckLatencyP99 = latencies[len(latencies)*99/100]
	}
	return st, nil
}
