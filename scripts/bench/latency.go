package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source"
)

func init() {
	register.DoFn2x0[pubsubio.Message, func(pubsubio.Message)](&stampFn{})
}

// inPublishAttr carries the input's publish time through the pipeline.
const inPublishAttr = "bench_in_publish_ns"

// stampFn forwards a message to Out with the input's publish time.
type stampFn struct{ Out pubsubio.Topic }

func (f *stampFn) ProcessElement(m pubsubio.Message, emit func(pubsubio.Message)) {
	emit(pubsubio.Message{
		Data:       m.Data,
		Attributes: map[string]string{inPublishAttr: strconv.FormatInt(m.PublishTime.UnixNano(), 10)},
		Topic:      f.Out,
	})
}

// latencyResult is the end-to-end and ack latency of one Read -> Write run.
type latencyResult struct {
	rate, seconds int
	endToEnd      []time.Duration // sorted
	ack           source.AckLatencySummary
}

func (r latencyResult) String() string {
	return fmt.Sprintf("latency, Read -> Write at %d msg/s for %d s (%d messages)\n"+
		"  publish to sink confirmation: p50 %v  p99 %v  max %v\n"+
		"  emission to ack (source):     p50 <= %v  p99 <= %v  max %v (%d acks)",
		r.rate, r.seconds, len(r.endToEnd),
		percentile(r.endToEnd, 0.5).Round(time.Millisecond), percentile(r.endToEnd, 0.99).Round(time.Millisecond),
		r.endToEnd[len(r.endToEnd)-1].Round(time.Millisecond),
		r.ack.P50.Round(time.Millisecond), r.ack.P99.Round(time.Millisecond), r.ack.Max.Round(time.Millisecond), r.ack.Count)
}

// measureLatency runs Read -> Write between two topics while a publisher
// feeds the input at a fixed rate. End-to-end latency is the output's
// publish time minus the input's: both are stamped by the same emulator
// when it accepts a publish, so the sink's confirmation is the moment the
// output was accepted. A warm-up message goes through first, so the
// pipeline's start-up is not measured.
func measureLatency(ctx context.Context, e *env, rate, seconds, size int) (latencyResult, error) {
	res := latencyResult{rate: rate, seconds: seconds}
	ps, err := e.newPairs(ctx, "lat", 2)
	if err != nil {
		return res, err
	}
	defer e.drop(ctx, ps)
	in, out := ps[0], ps[1]

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{in.sub}, IdleTimeout: 10 * time.Second, Connection: e.conn,
	})
	wcfg := pubsubio.WriteConfig{Topic: out.topic, Connection: e.conn, Publisher: pubsubio.PublisherOptions{DelayThreshold: *latencyDelay}}
	pubsubio.Write(s, wcfg, beam.ParDo(s, &stampFn{Out: out.topic}, msgs))
	pipeErr := make(chan error, 1)
	go func() { pipeErr <- beamx.Run(ctx, p) }()

	var mu sync.Mutex
	var lat []time.Duration
	arrived := make(chan struct{}, 1)
	rctx, stopReceive := context.WithCancel(ctx)
	defer stopReceive()
	go e.client.Subscriber(out.sub.String()).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		ns, err := strconv.ParseInt(m.Attributes[inPublishAttr], 10, 64)
		if err != nil {
			return
		}
		mu.Lock()
		lat = append(lat, m.PublishTime.Sub(time.Unix(0, ns)))
		mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
	})
	received := func() int { mu.Lock(); defer mu.Unlock(); return len(lat) }
	awaitCount := func(n int, bound time.Duration) error {
		deadline := time.After(bound)
		for received() < n {
			select {
			case <-arrived:
			case err := <-pipeErr:
				return fmt.Errorf("the pipeline ended with %d of %d messages through: %v", received(), n, err)
			case <-deadline:
				return fmt.Errorf("%d of %d messages through after %v", received(), n, bound)
			}
		}
		return nil
	}

	pub := e.client.Publisher(in.topic.String())
	defer pub.Stop()
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("warm-up")}).Get(ctx); err != nil {
		return res, err
	}
	if err := awaitCount(1, 2*time.Minute); err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	mu.Lock()
	lat = lat[:0]
	mu.Unlock()
	source.ResetAckLatency()

	n := rate * seconds
	if err := feed(ctx, pub, n, rate, size); err != nil {
		return res, err
	}
	if err := awaitCount(n, 2*time.Minute); err != nil {
		return res, err
	}
	if err := <-pipeErr; err != nil {
		return res, fmt.Errorf("latency pipeline: %w", err)
	}
	res.ack = source.AckLatency()
	mu.Lock()
	res.endToEnd = slices.Clone(lat)
	mu.Unlock()
	slices.Sort(res.endToEnd)
	return res, nil
}
