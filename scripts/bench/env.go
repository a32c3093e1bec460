package main

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
)

const project = "pubsubio-bench"

// env is the Pub/Sub server the contenders share, and where their
// pipelines run.
type env struct {
	conn   connection.Settings
	client *pubsub.Client
	seq    int
	// jobServer is a standalone Prism's endpoint; if empty, pipelines run
	// on Prism in this process (env.run).
	jobServer string
	// flink, when set, runs pipelines on that Flink instead (submitTo says
	// where their workers run).
	flink *flink.Flink
}

func newEnv(ctx context.Context, endpoint string) (*env, error) {
	conn := connection.Settings{EmulatorEndpoint: endpoint}
	client, err := connection.NewClient(ctx, project, conn)
	if err != nil {
		return nil, err
	}
	return &env{conn: conn, client: client}, nil
}

func (e *env) close() { e.client.Close() }

// pair is a topic and its one subscription: the emulator keeps what is
// published only for a subscription, as Pub/Sub does for a real consumer.
type pair struct {
	topic pubsubio.Topic
	sub   pubsubio.Subscription
}

// newPair creates a fresh topic and subscription.
func (e *env) newPair(ctx context.Context, tag string) (pair, error) {
	e.seq++
	name := fmt.Sprintf("bench-%s-%d-%d", tag, time.Now().UnixNano(), e.seq)
	p := pair{topic: pubsubio.TopicOf(project, name), sub: pubsubio.SubscriptionOf(project, name)}
	if _, err := e.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: p.topic.String()}); err != nil {
		return p, fmt.Errorf("creating %s: %w", p.topic, err)
	}
	if _, err := e.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: p.sub.String(), Topic: p.topic.String(), AckDeadlineSeconds: 60,
	}); err != nil {
		return p, fmt.Errorf("creating %s: %w", p.sub, err)
	}
	return p, nil
}

// newPairs creates n pairs.
func (e *env) newPairs(ctx context.Context, tag string, n int) ([]pair, error) {
	var ps []pair
	for range n {
		p, err := e.newPair(ctx, tag)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// drop deletes pairs after a run, so the emulator frees what they hold
// (runs of 16 KiB and 64 KiB messages would otherwise fill its heap).
func (e *env) drop(ctx context.Context, ps []pair) {
	for _, p := range ps {
		e.client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: p.sub.String()})
		e.client.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: p.topic.String()})
	}
}

// backlog publishes n messages of size bytes to each pair's topic.
func (e *env) backlog(ctx context.Context, ps []pair, n, size int) error {
	return e.backlogWith(ctx, ps, n, size, nil)
}

// backlogWith is backlog with attrs(i) (unless attrs is nil) on message i.
func (e *env) backlogWith(ctx context.Context, ps []pair, n, size int, attrs func(i int) map[string]string) error {
	for _, p := range ps {
		pub := e.client.Publisher(p.topic.String())
		results := make([]*pubsub.PublishResult, n)
		for i := range results {
			m := &pubsub.Message{Data: emulator.Payload(i, size)}
			if attrs != nil {
				m.Attributes = attrs(i)
			}
			results[i] = pub.Publish(ctx, m)
		}
		for _, r := range results {
			if _, err := r.Get(ctx); err != nil {
				pub.Stop()
				return fmt.Errorf("publishing the backlog to %s: %w", p.topic, err)
			}
		}
		pub.Stop()
	}
	return nil
}

func topicsOf(ps []pair) []pubsubio.Topic {
	var ts []pubsubio.Topic
	for _, p := range ps {
		ts = append(ts, p.topic)
	}
	return ts
}

func subsOf(ps []pair) []pubsubio.Subscription {
	var ss []pubsubio.Subscription
	for _, p := range ps {
		ss = append(ss, p.sub)
	}
	return ss
}

// warmUp publishes n messages of 1 KiB and reads them back with the raw
// client at the prototype's streams before anything is measured: a fresh
// emulator is a cold JVM that serves several times slower until its JIT
// has compiled the publish and pull paths, and whichever contender ran
// first would pay for it (measured: the same 1 KiB write case at 43,000
// msg/s on a fresh emulator and 93,000 after the read cases).
func (e *env) warmUp(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	ps, err := e.newPairs(ctx, "warmup", 1)
	if err != nil {
		return err
	}
	defer e.drop(ctx, ps)
	if err := e.backlog(ctx, ps, n, 1024); err != nil {
		return err
	}
	_, err = readRawAtPrototypeStreams(ctx, e, readCase{size: 1024, splitsPerSub: 1, subs: 1, messages: n}, ps)
	return err
}

// feed publishes n messages of size bytes with pub at rate msg/s, each
// at its time from the first, and waits for every result.
func feed(ctx context.Context, pub *pubsub.Publisher, n, rate, size int) error {
	start := time.Now()
	results := make([]*pubsub.PublishResult, n)
	for i := range results {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		results[i] = pub.Publish(ctx, &pubsub.Message{Data: emulator.Payload(i, size)})
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			return fmt.Errorf("feeding %s: %w", pub, err)
		}
	}
	return nil
}
