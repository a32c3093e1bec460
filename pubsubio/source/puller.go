package source

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// puller is what a split needs from Pub/Sub: a streaming pull, and the
// Acknowledge and ModifyAckDeadline RPCs. An interface so that split tests
// can deliver by hand.
type puller interface {
	// receive streams messages into f until ctx is done or the stream fails
	// permanently. f reports whether the split took the message; what it
	// did not take, and what was pulled but never handed to f, is given
	// back before receive returns.
	receive(ctx context.Context, f func(*pubsub.Message) bool) error
	// describe gets the subscription under Connection.RPCTimeout: it fails
	// if the subscription is gone or Pub/Sub cannot be reached.
	describe(ctx context.Context) error
	// acknowledge acks by ID: messages received by another process, or by
	// a subscriber that stopped.
	acknowledge(ctx context.Context, ackIDs []string) error
	// nack gives messages back by ID (a zero ack deadline), for a
	// subscriber that stopped.
	nack(ctx context.Context, ackIDs []string) error
	// health is what the streaming pulls last reported (health.go).
	health() *streamHealth
	// exactlyOnce reports whether the subscription has exactly-once
	// delivery, as its last describe or streaming-pull response said, and
	// whether one was seen.
	exactlyOnce() (enabled, known bool)
	close() error
}

// clientPuller is a puller over the Pub/Sub client.
type clientPuller struct {
	client    *pubsub.Client
	conn      connection.Settings
	sub       model.Subscription
	settings  pubsub.ReceiveSettings
	pulled    *pulled    // what the client pulled and has not handed over, and the stream's health
	givenBack *givenBack // the read's, told what a stop gives back
}

func dialPuller(ctx context.Context, sub model.Subscription, cfg Config, g *givenBack) (puller, error) {
	p := newPulled(cfg.TimestampAttribute)
	client, err := connection.NewClient(ctx, sub.Project, cfg.Connection, p.interceptor())
	if err != nil {
		return nil, fmt.Errorf("pubsubio.Read: connecting to read %s: %w", sub, err)
	}
	return &clientPuller{client: client, conn: cfg.Connection, sub: sub, settings: cfg.receiveSettings(), pulled: p, givenBack: g}, nil
}

// giveBackTimeout bounds the nack of what a stopped Receive left leased.
const giveBackTimeout = 10 * time.Second

func (s *clientPuller) receive(ctx context.Context, f func(*pubsub.Message) bool) error {
	// The client retries a stream that cannot connect without a word. One
	// describe under Connection.RPCTimeout first makes a worker that cannot
	// reach Pub/Sub fail the split's next bundle, naming the endpoint and
	// the call, instead of waiting in silence.
	if err := s.describe(ctx); err != nil {
		return err
	}
	subscriber := s.client.Subscriber(s.sub.String())
	subscriber.ReceiveSettings = s.settings
	err := subscriber.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		if f(m) {
			s.pulled.handedOver(m.ID)
		}
	})
	// Receive has returned: no callback runs any more, so what is left was
	// pulled and never taken by the split.
	if left := s.pulled.take(); len(left) > 0 {
		ackIDs := make([]string, 0, len(left))
		now := time.Now()
		for id, m := range left {
			ackIDs = append(ackIDs, m.ackID)
			s.givenBack.add(id, s.sub, m.eventTime, now)
		}
		nctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
		defer cancel()
		if nerr := s.nack(nctx, ackIDs); nerr != nil && !refusedOnly(nerr) {
			log.Warnf(nctx, "pubsubio.Read: giving back %d messages the stopped subscriber of %s had pulled but not delivered failed (they return when their lease lapses): %v", len(ackIDs), s.sub, nerr)
		}
	}
	return err
}

func (s *clientPuller) describe(ctx context.Context) error {
	return s.conn.Call(ctx, "pubsubio.Read", "GetSubscription "+s.sub.String(), func(ctx context.Context) error {
		sub, err := s.client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: s.sub.String()})
		if err == nil {
			s.pulled.exactlyOnce.set(sub.GetEnableExactlyOnceDelivery())
		}
		return err
	})
}

// acknowledge and nack run each request under Connection.RPCTimeout
// (connection.Settings.Call). On an exactly-once subscription Pub/Sub may
// refuse some ack IDs and take the rest: they return an *ackIDsRefused
// (sendByID).
func (s *clientPuller) acknowledge(ctx context.Context, ackIDs []string) error {
	return sendByID(ctx, ackIDs, func(ids []string) error {
		return s.conn.Call(ctx, "pubsubio.Read", "Acknowledge "+s.sub.String(), func(ctx context.Context) error {
			return s.client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{
				Subscription: s.sub.String(),
				AckIds:       ids,
			})
		})
	})
}

func (s *clientPuller) nack(ctx context.Context, ackIDs []string) error {
	return sendByID(ctx, ackIDs, func(ids []string) error {
		return s.conn.Call(ctx, "pubsubio.Read", "ModifyAckDeadline "+s.sub.String(), func(ctx context.Context) error {
			return s.client.SubscriptionAdminClient.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{
				Subscription:       s.sub.String(),
				AckIds:             ids,
				AckDeadlineSeconds: 0,
			})
		})
	})
}

func (s *clientPuller) health() *streamHealth { return &s.pulled.health }

func (s *clientPuller) exactlyOnce() (enabled, known bool) { return s.pulled.exactlyOnce.get() }

func (s *clientPuller) close() error { return s.client.Close() }
