package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/examples/native_wordcap/nativepubsubio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/sink"
)

func init() {
	register.DoFn2x0[[]byte, func(pubsubio.Message)](&generateFn{})
	register.DoFn2x0[[]byte, func([]byte)](&generatePayloadFn{})
	register.Emitter1[pubsubio.Message]()
	register.Emitter1[[]byte]()
}

// writeCase is one cell of the write matrix.
type writeCase struct {
	size, topics int
	messages     int  // in all, spread round-robin over the topics
	skewed       bool // spread by destinationsOf's skew instead
	protoMsgs    int  // for Beam's prototype writer, which publishes one at a time
}

func (c writeCase) String() string {
	return fmt.Sprintf("write %d B, %d topic(s), %d msgs", c.size, c.topics, c.messages)
}

// compareWrite publishes with the sink on Prism, with raw Publishers (same
// PublishSettings, every result awaited) and, at a smaller volume, with
// Beam's prototype writer; interleaved, rotating who goes first.
func compareWrite(ctx context.Context, e *env, c writeCase) (comparison, error) {
	cmp := comparison{name: c.String()}
	type entrant struct {
		name  string
		who   *contender
		n     int
		write func(context.Context, *env, writeCase, []pair) (float64, error)
	}
	contenders := selected([]entrant{{"sink", &cmp.connector, c.messages, writeWithSink}, {"raw", &cmp.raw, c.messages, writeRaw}, {"prototype", &cmp.prot, c.protoMsgs, writeWithPrototype}},
		func(k entrant) string { return k.name })
	for run := range *runs {
		for i := range contenders {
			k := contenders[(i+run)%len(contenders)]
			ps, err := e.newPairs(ctx, "w", c.topics)
			if err != nil {
				return cmp, err
			}
			s, err := measured(k.name, k.n, func() (float64, error) { return k.write(ctx, e, c, ps) })
			e.drop(ctx, ps)
			if err != nil {
				k.who.fail(k.name, run, err)
				continue
			}
			k.who.add(s)
		}
	}
	return cmp, nil
}

// writeRaw is the baseline: one Publisher per topic, each driven by a
// goroutine of its own with its share of the messages (round robin), every
// result awaited. Flow control blocks at the sink's default in-flight caps,
// shared evenly by the publishers as the sink's are shared by its
// destinations: those caps are the sink's publish settings, and an
// uncapped publisher would hold a whole run in memory (640 MiB of 64 KiB
// messages), which no sink setting allows.
func writeRaw(ctx context.Context, e *env, c writeCase, ps []pair) (float64, error) {
	pubs := make([]*pubsub.Publisher, len(ps))
	for t, p := range ps {
		pubs[t] = e.client.Publisher(p.topic.String())
		pubs[t].PublishSettings.FlowControlSettings = pubsub.FlowControlSettings{
			MaxOutstandingMessages: sink.DefaultMaxInFlightMessages / len(ps),
			MaxOutstandingBytes:    sink.DefaultMaxInFlightBytes / len(ps),
			LimitExceededBehavior:  pubsub.FlowControlBlock,
		}
		defer pubs[t].Stop()
	}
	start := time.Now()
	steady.begin()
	errs := make(chan error, len(pubs))
	for t, pub := range pubs {
		go func() {
			var results []*pubsub.PublishResult
			for i := t; i < c.messages; i += len(pubs) {
				results = append(results, pub.Publish(ctx, &pubsub.Message{Data: emulator.Payload(i, c.size)}))
			}
			for _, r := range results {
				if _, err := r.Get(ctx); err != nil {
					errs <- fmt.Errorf("raw publish to %s: %w", pub, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range pubs {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	steady.end()
	return float64(c.messages) / time.Since(start).Seconds(), nil
}

// starts records when each run's generator began.
var starts sync.Map // run ID -> *atomic.Pointer[time.Time]

// markStart records that run's generator began. In a worker process of
// its own (Flink's PROCESS environment) no run is registered: the server's
// figures time those.
func markStart(run string) {
	v, ok := starts.Load(run)
	if !ok {
		return
	}
	now := time.Now()
	if v.(*atomic.Pointer[time.Time]).CompareAndSwap(nil, &now) {
		steady.begin()
	}
}

// generateFn emits the run's messages inside the pipeline, so the graph
// stays small and the clock starts when the first message exists.
type generateFn struct {
	Run    string
	N      int
	Size   int
	Topics []pubsubio.Topic // round-robin destinations
	Skewed bool             // destinationsOf's skew instead of round robin
}

func (f *generateFn) ProcessElement(_ []byte, emit func(pubsubio.Message)) {
	markStart(f.Run)
	for i, t := range destinationsOf(f.N, len(f.Topics), f.Skewed) {
		emit(pubsubio.Message{Data: emulator.Payload(i, f.Size), Topic: f.Topics[t]})
	}
}

// generatePayloadFn is generateFn for the prototype writer, which takes
// []byte and one topic per transform: it emits the messages of shard Shard.
type generatePayloadFn struct {
	Run              string
	N, Size          int
	Shard, NumShards int
}

func (f *generatePayloadFn) ProcessElement(_ []byte, emit func([]byte)) {
	markStart(f.Run)
	for i := f.Shard; i < f.N; i += f.NumShards {
		emit(emulator.Payload(i, f.Size))
	}
}

// runPipeline runs p and returns messages per second from the generator's
// start to the pipeline's end (every publish confirmed).
func runPipeline(ctx context.Context, e *env, run string, n int, p *beam.Pipeline) (float64, error) {
	start := &atomic.Pointer[time.Time]{}
	starts.Store(run, start)
	defer starts.Delete(run)
	if err := e.run(ctx, p); err != nil {
		return 0, err
	}
	first := start.Load()
	if first == nil { // generated in a worker process of Flink's (PROCESS): the server times it
		return 0, nil
	}
	steady.end()
	return float64(n) / time.Since(*first).Seconds(), nil
}

func writeWithSink(ctx context.Context, e *env, c writeCase, ps []pair) (float64, error) {
	return writeWithSinkConfig(ctx, e, c, ps, pubsubio.WriteConfig{})
}

// writeWithSinkConfig is writeWithSink with options set on cfg.
func writeWithSinkConfig(ctx context.Context, e *env, c writeCase, ps []pair, cfg pubsubio.WriteConfig) (float64, error) {
	run := ps[0].topic.ID
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, &generateFn{Run: run, N: c.messages, Size: c.size, Topics: topicsOf(ps), Skewed: c.skewed}, beam.Impulse(s))
	cfg.Topic = ps[0].topic
	cfg.Connection = e.conn
	pubsubio.Write(s, cfg, msgs)
	rate, err := runPipeline(ctx, e, run, c.messages, p)
	if err != nil {
		return 0, fmt.Errorf("sink pipeline: %w", err)
	}
	return rate, nil
}

// writeWithPrototype runs Beam's examples/native_wordcap/nativepubsubio
// writer, used as a library: one Write per topic. It reaches the emulator
// only through PUBSUB_EMULATOR_HOST, set for its run alone.
func writeWithPrototype(ctx context.Context, e *env, c writeCase, ps []pair) (float64, error) {
	os.Setenv("PUBSUB_EMULATOR_HOST", e.conn.EmulatorEndpoint)
	defer os.Unsetenv("PUBSUB_EMULATOR_HOST")
	run := ps[0].topic.ID + "-proto"
	p, s := beam.NewPipelineWithRoot()
	for i, pr := range ps {
		payloads := beam.ParDo(s, &generatePayloadFn{Run: run, N: c.protoMsgs, Size: c.size, Shard: i, NumShards: len(ps)}, beam.Impulse(s))
		nativepubsubio.Write(ctx, s, payloads, project, pr.topic.ID)
	}
	rate, err := runPipeline(ctx, e, run, c.protoMsgs, p)
	if err != nil {
		return 0, fmt.Errorf("prototype pipeline: %w", err)
	}
	return rate, nil
}
