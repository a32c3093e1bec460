package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/examples/native_wordcap/nativepubsubio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

func init() {
	register.DoFn2x0[[]byte, func(pubsubio.Message)](&generateFn{})
	register.DoFn2x0[[]byte, func([]byte)](&generatePayloadFn{})
	register.Emitter1[pubsubio.Message]()
	register.Emitter1[[]byte]()
}

// starts records when each run's generator began, for the write runs.
var starts sync.Map // run ID -> *atomic.Pointer[time.Time]

func markStart(run string) {
	v, _ := starts.Load(run)
	v.(*atomic.Pointer[time.Time]).CompareAndSwap(nil, ptr(time.Now()))
}

func ptr[T any](v T) *T { return &v }

// generateFn emits the run's messages inside the pipeline, so the graph
// stays small and the clock starts when the first message exists.
type generateFn struct {
	Run  string
	N    int
	Size int
}

func (f *generateFn) ProcessElement(_ []byte, emit func(pubsubio.Message)) {
	markStart(f.Run)
	for i := range f.N {
		emit(pubsubio.Message{Data: emulator.Payload(i, f.Size)})
	}
}

// generatePayloadFn is generateFn for the prototype writer, which takes
// []byte.
type generatePayloadFn struct {
	Run  string
	N    int
	Size int
}

func (f *generatePayloadFn) ProcessElement(_ []byte, emit func([]byte)) {
	markStart(f.Run)
	for i := range f.N {
		emit(emulator.Payload(i, f.Size))
	}
}

// compareWrite publishes the same volume with the sink on Prism and with a
// raw Publisher (same PublishSettings, every result awaited), interleaved;
// and a smaller volume with Beam's prototype writer, which publishes one
// message at a time and would take too long at full volume.
func compareWrite(ctx context.Context, e *env) (comparison, []float64, error) {
	c := comparison{name: fmt.Sprintf("write %d x %d B, in flight %d", *writeMessages, *size, *sinkInFlight), label: "sink"}
	var proto []float64
	for run := range *runs {
		order := []string{"sink", "raw"}
		if run%2 == 1 {
			order = []string{"raw", "sink"}
		}
		for _, who := range order {
			topic, err := e.topic(ctx)
			if err != nil {
				return c, nil, err
			}
			var rate float64
			if who == "sink" {
				rate, err = writeWithSink(ctx, e, topic)
				c.source = append(c.source, rate)
			} else {
				rate, err = writeRaw(ctx, e, topic)
				c.raw = append(c.raw, rate)
			}
			if err != nil {
				return c, nil, err
			}
		}
		topic, err := e.topic(ctx)
		if err != nil {
			return c, nil, err
		}
		rate, err := writeWithPrototype(ctx, e, topic)
		if err != nil {
			return c, nil, err
		}
		proto = append(proto, rate)
	}
	return c, proto, nil
}

// topic creates a fresh topic with one subscription (so the emulator keeps
// what is published, as it would for a real consumer).
func (e *env) topic(ctx context.Context) (pubsubio.Topic, error) {
	e.seq++
	name := fmt.Sprintf("bench-w-%d-%d", time.Now().UnixNano(), e.seq)
	topic := pubsubio.TopicOf(project, name)
	if _, err := e.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic.String()}); err != nil {
		return topic, err
	}
	_, err := e.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: pubsubio.SubscriptionOf(project, name).String(), Topic: topic.String(),
	})
	return topic, err
}

func writeRaw(ctx context.Context, e *env, topic pubsubio.Topic) (float64, error) {
	pub := e.client.Publisher(topic.String())
	defer pub.Stop()
	start := time.Now()
	results := make([]*pubsub.PublishResult, *writeMessages)
	for i := range results {
		results[i] = pub.Publish(ctx, &pubsub.Message{Data: emulator.Payload(i, *size)})
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			return 0, fmt.Errorf("raw publish: %w", err)
		}
	}
	return float64(*writeMessages) / time.Since(start).Seconds(), nil
}

// runPipeline runs p and returns messages per second from the generator's
// start to the pipeline's end (every publish confirmed).
func runPipeline(ctx context.Context, run string, n int, p *beam.Pipeline) (float64, error) {
	start := &atomic.Pointer[time.Time]{}
	starts.Store(run, start)
	defer starts.Delete(run)
	if err := beamx.Run(ctx, p); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(*start.Load()).Seconds(), nil
}

func writeWithSink(ctx context.Context, e *env, topic pubsubio.Topic) (float64, error) {
	run := topic.ID
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, &generateFn{Run: run, N: *writeMessages, Size: *size}, beam.Impulse(s))
	cfg := pubsubio.WriteConfig{Topic: topic, Connection: e.conn}
	if *sinkInFlight > 0 {
		cfg.MaxInFlightMessages = *sinkInFlight
		cfg.MaxInFlightBytes = int64(*sinkInFlight) * int64(*size+64)
	}
	pubsubio.Write(s, cfg, msgs)
	rate, err := runPipeline(ctx, run, *writeMessages, p)
	if err != nil {
		return 0, fmt.Errorf("sink pipeline: %w", err)
	}
	return rate, nil
}

// writeWithPrototype runs Beam's examples/native_wordcap/nativepubsubio
// writer, used as a library. It reaches the emulator only through
// PUBSUB_EMULATOR_HOST, which is set for its run alone.
func writeWithPrototype(ctx context.Context, e *env, topic pubsubio.Topic) (float64, error) {
	os.Setenv("PUBSUB_EMULATOR_HOST", e.conn.EmulatorEndpoint)
	defer os.Unsetenv("PUBSUB_EMULATOR_HOST")
	run := topic.ID + "-proto"
	p, s := beam.NewPipelineWithRoot()
	payloads := beam.ParDo(s, &generatePayloadFn{Run: run, N: *prototypeMessages, Size: *size}, beam.Impulse(s))
	nativepubsubio.Write(ctx, s, payloads, project, topic.ID)
	rate, err := runPipeline(ctx, run, *prototypeMessages, p)
	if err != nil {
		return 0, fmt.Errorf("prototype pipeline: %w", err)
	}
	return rate, nil
}
