// Crashpipeline is the pipeline the crash tests kill: it reads one
// subscription with pubsubio.Read, tags every message with the ID it had on
// the input (attribute crash.input_id, payload unchanged) and publishes it
// with pubsubio.Write to an output topic. Prism fuses the writer into the
// read's bundle, so a message is acked on the input only after its copy was
// confirmed on the output: a kill at any point may duplicate, never lose.
//
// It uses the connector's public API only. The runner is Beam's: Prism
// in-process by default, or a job server with
// --runner=universal --endpoint=localhost:PORT --environment_type=LOOPBACK
// (then this process is the SDK worker).
//
//	crashpipeline --emulator=localhost:8085 \
//	    --subscription=projects/p/subscriptions/in --output_topic=projects/p/topics/out \
//	    --idle_timeout=20s
//
// Three flags make it misbehave on purpose: --stall blocks the transform
// on its first message (the source keeps receiving into its buffer,
// nothing commits), --fail_once makes the transform return an error for
// the first message it sees in this process (one failed bundle), and
// --fail_after=N for the Nth. --window puts a GroupByKey in fixed windows
// between the read and the write, as every windowed pipeline has one:
// Prism no longer fuses the writer into the read's bundle, and the read
// acks what that bundle emitted once it committed, before the windows
// fire. --shapes builds several such pipelines in one job, one per
// subscription and output topic (both flags then comma-separated): fused
// (read, tag, write), window (the GroupByKey above, in windows of --window
// or 2 s), reshuffle (a Reshuffle between tag and write).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// The tests' side of InputIDAttribute, DoneLine and StalledLine is
// integration/crash's constants of the same names, which must stay equal
// to these (this binary does not import that package: see its comment).

// InputIDAttribute carries the input message's ID on the output copy, so a
// test can match every output to its input.
const InputIDAttribute = "crash.input_id"

// DoneLine is printed on stdout when the pipeline finished successfully.
const DoneLine = "crashpipeline: pipeline finished"

// StalledLine is printed on stderr when --stall has blocked the transform.
const StalledLine = "crashpipeline: transform stalled"

var (
	emulator     = flag.String("emulator", "", "host:port of the Pub/Sub emulator the write publishes to (and the read reads from, unless --read_emulator)")
	readEmulator = flag.String("read_emulator", "", "host:port the read connects to instead of --emulator (e.g. a proxy in front of it)")
	subscription = flag.String("subscription", "", "input subscription, projects/P/subscriptions/S")
	outputTopic  = flag.String("output_topic", "", "output topic, projects/P/topics/T")
	idleTimeout  = flag.Duration("idle_timeout", 0, "finish once nothing has arrived for this long; 0 reads forever")
	ackExtension = flag.Duration("max_ack_extension", 10*time.Second, "MaxDurationPerAckExtension: bounds how long a killed process's messages stay leased")
	maxOutstand  = flag.Int("max_outstanding_messages", 0, "the read's MaxOutstandingMessages (0: the connector's default, -1: no limit)")
	bufferMax    = flag.Int("buffer_max_messages", 0, "the read's BufferMaxMessages (0: the connector's default)")
	splits       = flag.Int("splits", 0, "the read's Splits (0: the connector's default)")
	stall        = flag.Bool("stall", false, "block the transform on its first message until the process is killed (at most --stall_limit)")
	stallLimit   = flag.Duration("stall_limit", 10*time.Minute, "with --stall: fail the pipeline after stalling this long, so a forgotten process ends")
	failOnce     = flag.Bool("fail_once", false, "return an error from the transform for the first message this process sees")
	failAfter    = flag.Int64("fail_after", 0, "return an error from the transform for the Nth message this process sees (0: never; --fail_once is 1)")
	shapes       = flag.String("shapes", "", "comma-separated, one per --subscription and --output_topic (then comma-separated too): fused, window or reshuffle; empty: one pipeline, grouped when --window is set")
	windowSize   = flag.Duration("window", 0, "group the tagged messages in fixed windows of this size before writing them (0: no grouping)")
	lateness     = flag.Duration("allowed_lateness", 0, "with --window: the windows' allowed lateness")
	timestamp    = flag.String("timestamp_attribute", "", "the read's TimestampAttribute")
)

func init() {
	register.DoFn2x2[context.Context, pubsubio.Message, pubsubio.Message, error](&tagFn{})
	register.Function2x0(byShard)
	register.Function3x0(ungroup)
	register.Iter1[pubsubio.Message]()
}

// shards is how many keys --window groups the messages under.
const shards = 8

// byShard keys a message by a shard of its input ID.
func byShard(m pubsubio.Message, emit func(int, pubsubio.Message)) {
	h := 0
	for _, c := range m.Attributes[InputIDAttribute] {
		h = 31*h + int(c)
	}
	emit((h%shards+shards)%shards, m)
}

// ungroup emits every message of a shard's window.
func ungroup(_ int, msgs func(*pubsubio.Message) bool, emit func(pubsubio.Message)) {
	var m pubsubio.Message
	for msgs(&m) {
		emit(m)
	}
}

// tagFn keeps the input ID on the message and clears what the read set
// that a publish must not carry.
type tagFn struct {
	Stall      bool
	StallLimit time.Duration
	FailAt     int64 // fail the bundle of this process's FailAt-th message (0: never)
}

// Process-wide, because Beam makes one DoFn instance per bundle processor:
// "first message" and "once" mean once per worker process.
var (
	stallOnce sync.Once
	seen      atomic.Int64
)

// bundles counts the bundles of the read's stage, which tagFn is fused
// into: on Flink each ends with the read's self-checkpoint, a new Flink
// state (docs/upstream/flink-drain-and-resume-delay.md).
var bundles = beam.NewCounter("crashpipeline", "bundles")

func (f *tagFn) StartBundle(ctx context.Context) { bundles.Inc(ctx, 1) }

func (f *tagFn) ProcessElement(ctx context.Context, m pubsubio.Message) (pubsubio.Message, error) {
	if f.Stall {
		var err error
		stallOnce.Do(func() {
			// stderr, not Beam's log: the test waits for this line, and the
			// worker's log may go to the runner rather than this process.
			fmt.Fprintf(os.Stderr, "%s on message %s\n", StalledLine, m.ID)
			time.Sleep(f.StallLimit) // the test kills the process long before
			err = fmt.Errorf("crashpipeline: stalled for %v and nobody killed the process; the test that started it is gone", f.StallLimit)
		})
		if err != nil {
			return pubsubio.Message{}, err
		}
	}
	if n := seen.Add(1); f.FailAt > 0 && n == f.FailAt {
		log.Infof(ctx, "crashpipeline: failing the bundle of message %s on purpose (message %d of this process)", m.ID, n)
		return pubsubio.Message{}, fmt.Errorf("crashpipeline: failing the bundle of message %s on purpose (message %d of this process)", m.ID, n)
	}
	attrs := make(map[string]string, len(m.Attributes)+1)
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	attrs[InputIDAttribute] = m.ID
	return pubsubio.Message{Data: m.Data, Attributes: attrs, OrderingKey: m.OrderingKey}, nil
}

func main() {
	flag.Parse()
	beam.Init()
	if err := run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "crashpipeline: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(DoneLine)
}

func run(ctx context.Context) error {
	if *emulator == "" || *subscription == "" || *outputTopic == "" {
		return errors.New("--emulator, --subscription and --output_topic are required")
	}
	subs, outs := strings.Split(*subscription, ","), strings.Split(*outputTopic, ",")
	kinds := []string{"fused"}
	if *windowSize > 0 {
		kinds[0] = "window"
	}
	if *shapes != "" {
		kinds = strings.Split(*shapes, ",")
	}
	if len(subs) != len(kinds) || len(outs) != len(kinds) {
		return fmt.Errorf("%d subscriptions and %d output topics for %d shapes (%v): give one of each per shape", len(subs), len(outs), len(kinds), kinds)
	}
	p, s := beam.NewPipelineWithRoot()
	for i, kind := range kinds {
		if err := build(s.Scope(kind), subs[i], outs[i], kind); err != nil {
			return err
		}
	}
	if err := beamx.Run(ctx, p); err != nil {
		return fmt.Errorf("running the pipeline: %w", err)
	}
	return nil
}

// build adds to s the pipeline of one shape, from subscription to topic.
func build(s beam.Scope, subscription, outputTopic, shape string) error {
	sub, err := pubsubio.ParseSubscription(subscription)
	if err != nil {
		return fmt.Errorf("--subscription: %w", err)
	}
	topic, err := pubsubio.ParseTopic(outputTopic)
	if err != nil {
		return fmt.Errorf("--output_topic: %w", err)
	}
	readFrom := *emulator
	if *readEmulator != "" {
		readFrom = *readEmulator
	}
	msgs, err := pubsubio.TryRead(s, pubsubio.ReadConfig{
		Subscriptions:              []pubsubio.Subscription{sub},
		IdleTimeout:                *idleTimeout,
		MaxDurationPerAckExtension: *ackExtension,
		MaxOutstandingMessages:     *maxOutstand,
		BufferMaxMessages:          *bufferMax,
		Splits:                     *splits,
		TimestampAttribute:         *timestamp,
		Connection:                 pubsubio.Connection{EmulatorEndpoint: readFrom},
	})
	if err != nil {
		return fmt.Errorf("configuring the read: %w", err)
	}
	failAt := *failAfter
	if *failOnce {
		failAt = 1
	}
	tagged := beam.ParDo(s, &tagFn{Stall: *stall, StallLimit: *stallLimit, FailAt: failAt}, msgs)
	switch shape {
	case "fused":
	case "window":
		size := *windowSize
		if size == 0 {
			size = 2 * time.Second
		}
		windowed := beam.WindowInto(s, window.NewFixedWindows(size), beam.ParDo(s, byShard, tagged), beam.AllowedLateness(*lateness))
		tagged = beam.ParDo(s, ungroup, beam.GroupByKey(s, windowed))
	case "reshuffle":
		tagged = beam.Reshuffle(s, tagged)
	default:
		return fmt.Errorf("--shapes: %q is not fused, window or reshuffle", shape)
	}
	if _, err := pubsubio.TryWrite(s, pubsubio.WriteConfig{
		Topic:      topic,
		Connection: pubsubio.Connection{EmulatorEndpoint: *emulator},
	}, tagged); err != nil {
		return fmt.Errorf("configuring the write: %w", err)
	}
	return nil
}
