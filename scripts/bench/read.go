package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
)

const project = "pubsubio-bench"

func init() {
	register.DoFn1x0[pubsubio.Message](&countFn{})
}

// env is the emulator the contenders share.
type env struct {
	conn   connection.Settings
	client *pubsub.Client
	seq    int
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

// backlog creates a fresh topic and subscription and publishes n messages
// of the benchmark size to it, so every run starts from the same backlog.
func (e *env) backlog(ctx context.Context, n int) (pubsubio.Subscription, error) {
	e.seq++
	name := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), e.seq)
	topic := pubsubio.TopicOf(project, name)
	sub := pubsubio.SubscriptionOf(project, name)
	if _, err := e.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic.String()}); err != nil {
		return sub, err
	}
	if _, err := e.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: sub.String(), Topic: topic.String(), AckDeadlineSeconds: 60,
	}); err != nil {
		return sub, err
	}
	pub := e.client.Publisher(topic.String())
	defer pub.Stop()
	results := make([]*pubsub.PublishResult, n)
	for i := range results {
		results[i] = pub.Publish(ctx, &pubsub.Message{Data: emulator.Payload(i, *size)})
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			return sub, err
		}
	}
	return sub, nil
}

// compareRead reads the same backlog with the source (splits splits) and
// with as many raw Receive + Ack loops, interleaved, alternating who goes
// first.
func compareRead(ctx context.Context, e *env, splits int) (comparison, error) {
	c := comparison{name: fmt.Sprintf("read %d x %d B, %d split(s)", *messages, *size, splits), label: "source"}
	for run := range *runs {
		order := []bool{true, false}
		if run%2 == 1 {
			order = []bool{false, true}
		}
		for _, source := range order {
			sub, err := e.backlog(ctx, *messages)
			if err != nil {
				return c, fmt.Errorf("publishing the backlog: %w", err)
			}
			if source {
				rate, err := readWithSource(ctx, e, sub, splits)
				if err != nil {
					return c, err
				}
				c.source = append(c.source, rate)
			} else {
				rate, err := readRaw(ctx, e, sub, splits)
				if err != nil {
					return c, err
				}
				c.raw = append(c.raw, rate)
			}
		}
	}
	return c, nil
}

// receiveSettings are the source's defaults, so both contenders pull alike.
var receiveSettings = pubsub.ReceiveSettings{
	MaxOutstandingMessages: pubsub.DefaultReceiveSettings.MaxOutstandingMessages,
	MaxOutstandingBytes:    pubsub.DefaultReceiveSettings.MaxOutstandingBytes,
	MaxExtension:           pubsub.DefaultReceiveSettings.MaxExtension,
	NumGoroutines:          1,
}

// readRaw is the baseline: loops of Subscriber.Receive that ack every
// message, one client per loop as the source has one per split.
func readRaw(ctx context.Context, e *env, sub pubsubio.Subscription, loops int) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got atomic.Int64
	var end time.Time
	var once sync.Once
	var wg sync.WaitGroup
	errs := make(chan error, loops)
	start := time.Now()
	for range loops {
		client, err := connection.NewClient(ctx, project, e.conn)
		if err != nil {
			return 0, err
		}
		defer client.Close()
		s := client.Subscriber(sub.String())
		s.ReceiveSettings = receiveSettings
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
				m.Ack()
				if got.Add(1) == int64(*messages) {
					once.Do(func() { end = time.Now(); cancel() })
				}
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, fmt.Errorf("raw receive: %w", err)
		}
	}
	if end.IsZero() {
		return 0, fmt.Errorf("raw receive stopped after %d of %d messages", got.Load(), *messages)
	}
	return float64(*messages) / end.Sub(start).Seconds(), nil
}

// counts is where countFn instances of one run meet (Prism runs in-process).
var counts sync.Map // run ID -> *runCount

type runCount struct {
	n      atomic.Int64
	target int64
	once   sync.Once
	end    atomic.Pointer[time.Time]
}

// countFn records when the run's last expected message reached downstream.
type countFn struct {
	Run string
}

func (f *countFn) ProcessElement(pubsubio.Message) {
	v, _ := counts.Load(f.Run)
	rc := v.(*runCount)
	if rc.n.Add(1) == rc.target {
		rc.once.Do(func() { t := time.Now(); rc.end.Store(&t) })
	}
}

// readWithSource reads the backlog with a bounded pubsubio read on Prism.
func readWithSource(ctx context.Context, e *env, sub pubsubio.Subscription, splits int) (float64, error) {
	run := fmt.Sprintf("%s-%d", sub.ID, splits)
	rc := &runCount{target: int64(*messages)}
	counts.Store(run, rc)
	defer counts.Delete(run)

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{sub},
		Splits:        splits,
		// Bounded by idleness, not by count: the time measured is to the
		// last message's arrival downstream, and a count bound shared by
		// several splits ends the last ones only once redeliveries settle.
		IdleTimeout: 5 * time.Second,
		Connection:  e.conn,
	})
	beam.ParDo0(s, &countFn{Run: run}, msgs)
	start := time.Now()
	if err := beamx.Run(ctx, p); err != nil {
		return 0, fmt.Errorf("source pipeline: %w", err)
	}
	end := rc.end.Load()
	if end == nil {
		return 0, fmt.Errorf("source emitted %d of %d messages", rc.n.Load(), *messages)
	}
	return float64(*messages) / end.Sub(start).Seconds(), nil
}
