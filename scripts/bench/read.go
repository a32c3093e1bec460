package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/examples/native_wordcap/nativepubsubio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source"
)

func init() {
	register.DoFn2x0[pubsubio.Message, func(int)](&countMessagesFn{})
	register.DoFn2x0[[]byte, func(int)](&countPayloadsFn{})
	register.Emitter1[int]()
}

// readCase is one cell of the read matrix.
type readCase struct {
	size, splitsPerSub, subs int
	messages                 int // per subscription
}

func (c readCase) String() string {
	return fmt.Sprintf("read %d B, %d sub(s) x %d split(s), %d msgs/sub", c.size, c.subs, c.splitsPerSub, c.messages)
}

func (c readCase) total() int { return c.messages * c.subs }

// compareRead reads the same backlog with the source, with raw Receive +
// Ack loops (one client per split, identical ReceiveSettings) and with
// Beam's prototype reader, interleaved, rotating who goes first.
func compareRead(ctx context.Context, e *env, c readCase) (comparison, error) {
	cmp := comparison{name: c.String()}
	type entrant struct {
		name string
		who  *contender
		read func(context.Context, *env, readCase, []pair) (float64, error)
	}
	contenders := []entrant{{"source", &cmp.connector, readWithSource}, {"raw", &cmp.raw, readRaw}, {"prototype", &cmp.prot, readWithPrototype}}
	if c.splitsPerSub == 1 {
		contenders = append(contenders,
			entrant{"source-10-streams", &cmp.atProtoStreams, readWithSourceAtPrototypeStreams},
			entrant{"raw-10-streams", &cmp.rawAtProtoStreams, readRawAtPrototypeStreams})
	}
	contenders = selected(contenders, func(k entrant) string { return k.name })
	for run := range *runs {
		for i := range contenders {
			k := contenders[(i+run)%len(contenders)]
			ps, err := e.newPairs(ctx, "r", c.subs)
			if err != nil {
				return cmp, err
			}
			if err := e.backlog(ctx, ps, c.messages, c.size); err != nil {
				return cmp, err
			}
			s, err := measured(k.name, c.total(), func() (float64, error) { return k.read(ctx, e, c, ps) })
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

// receiveSettings are the source's defaults, so raw loops pull alike.
var receiveSettings = pubsub.ReceiveSettings{
	MaxOutstandingMessages: pubsub.DefaultReceiveSettings.MaxOutstandingMessages,
	MaxOutstandingBytes:    pubsub.DefaultReceiveSettings.MaxOutstandingBytes,
	MaxExtension:           pubsub.DefaultReceiveSettings.MaxExtension,
	NumGoroutines:          1,
}

// readRaw is the baseline: per subscription, splitsPerSub loops of
// Subscriber.Receive that ack every message, one client per loop as the
// source has one per split.
func readRaw(ctx context.Context, e *env, c readCase, ps []pair) (float64, error) {
	return readRawStreams(ctx, e, c, ps, receiveSettings)
}

// readRawAtPrototypeStreams is readRaw with as many streams per
// subscription as the prototype opens (one loop, NumGoroutines 10): what
// the client does with the prototype's means, acking everything.
func readRawAtPrototypeStreams(ctx context.Context, e *env, c readCase, ps []pair) (float64, error) {
	rs := receiveSettings
	rs.NumGoroutines = prototypeStreams
	return readRawStreams(ctx, e, c, ps, rs)
}

// readRawStreams is readRaw with rs.
func readRawStreams(ctx context.Context, e *env, c readCase, ps []pair, rs pubsub.ReceiveSettings) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got atomic.Int64
	var first atomic.Pointer[time.Time]
	var end time.Time
	var once sync.Once
	var wg sync.WaitGroup
	errs := make(chan error, c.subs*c.splitsPerSub)
	for _, p := range ps {
		for range c.splitsPerSub {
			client, err := connection.NewClient(ctx, project, e.conn)
			if err != nil {
				return 0, err
			}
			defer client.Close()
			s := client.Subscriber(p.sub.String())
			s.ReceiveSettings = rs
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
					m.Ack()
					now := time.Now()
					if first.CompareAndSwap(nil, &now) {
						steady.begin()
					}
					if got.Add(1) == int64(c.total()) {
						steady.end()
						once.Do(func() { end = time.Now(); cancel() })
					}
				})
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, fmt.Errorf("raw receive: %w", err)
		}
	}
	if end.IsZero() {
		return 0, fmt.Errorf("raw receive stopped after %d of %d messages", got.Load(), c.total())
	}
	return float64(c.total()-1) / end.Sub(*first.Load()).Seconds(), nil // as runCount.rate
}

// counts is where the counting DoFns of one run meet (Prism runs
// in-process). done is closed when the run's last expected message
// arrives downstream.
var counts sync.Map // run ID -> *runCount

type runCount struct {
	n        atomic.Int64
	target   int64
	first    atomic.Pointer[time.Time]
	end      time.Time
	done     chan struct{}
	atTarget func() // when set, runs once the last expected message arrived
}

func newRunCount(run string, target int) (*runCount, func()) {
	rc := &runCount{target: int64(target), done: make(chan struct{})}
	counts.Store(run, rc)
	return rc, func() { counts.Delete(run) }
}

// countOne counts a message of run. In a worker process of its own
// (Flink's PROCESS environment) no run is registered: the server's acks
// tell those runs' progress.
func countOne(run string) {
	v, ok := counts.Load(run)
	if !ok {
		return
	}
	rc := v.(*runCount)
	now := time.Now()
	if rc.first.CompareAndSwap(nil, &now) {
		steady.begin()
	}
	if rc.n.Add(1) == rc.target {
		steady.end()
		rc.end = time.Now()
		if rc.atTarget != nil {
			rc.atTarget()
		}
		close(rc.done)
	}
}

// rate is the steady-state throughput: messages per second from the first
// arrival to the last expected one. Start-up (a pipeline's submission and
// prepare step, a client's first stream) is left out for every contender
// alike: it is a constant, not a rate, and would dominate short runs.
func (rc *runCount) rate() (float64, error) {
	select {
	case <-rc.done:
		return float64(rc.target-1) / rc.end.Sub(*rc.first.Load()).Seconds(), nil
	default:
		return 0, fmt.Errorf("%d of %d messages arrived", rc.n.Load(), rc.target)
	}
}

type countMessagesFn struct{ Run string }

func (f *countMessagesFn) ProcessElement(pubsubio.Message, func(int)) { countOne(f.Run) }

type countPayloadsFn struct{ Run string }

func (f *countPayloadsFn) ProcessElement([]byte, func(int)) { countOne(f.Run) }

// readWithSource reads the backlog with a bounded pubsubio read on Prism.
func readWithSource(ctx context.Context, e *env, c readCase, ps []pair) (float64, error) {
	return readWithSourceConfig(ctx, e, c, ps, pubsubio.ReadConfig{}, sourceOptions{})
}

// sourceOptions shape a measured source run beyond its ReadConfig.
type sourceOptions struct {
	through  func(beam.Scope, beam.PCollection) beam.PCollection // between the read and the count
	atTarget func()                                              // runs once the last expected message was counted
	// ownBudget keeps the source's buffer budget as cfg has it, against a
	// server that holds to flow control; otherwise it is raised to the
	// streams' windows (raiseBudgetToStreams).
	ownBudget bool
}

// readWithSourceConfig is readWithSource with options set on cfg and opts.
func readWithSourceConfig(ctx context.Context, e *env, c readCase, ps []pair, cfg pubsubio.ReadConfig, opts sourceOptions) (float64, error) {
	run := ps[0].sub.ID
	rc, forget := newRunCount(run, c.total())
	defer forget()
	rc.atTarget = opts.atTarget
	cfg.Subscriptions = subsOf(ps)
	cfg.Splits = c.splitsPerSub * c.subs
	if !opts.ownBudget {
		raiseBudgetToStreams(&cfg, c)
	}
	// Bounded by idleness, not by count: the time measured is to the last
	// message's arrival downstream, and a count bound shared by several
	// splits ends the last ones only once redeliveries settle.
	cfg.IdleTimeout = 5 * time.Second
	cfg.Connection = e.conn
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, cfg)
	if opts.through != nil {
		msgs = opts.through(s, msgs)
	}
	endStage(s, beam.ParDo(s, &countMessagesFn{Run: run}, msgs))
	if err := e.run(ctx, p); err != nil {
		return 0, fmt.Errorf("source pipeline: %w", err)
	}
	return rc.rate()
}

// prototypeStreams is how many streaming pulls the prototype opens per
// subscription: it uses the v1 client's default ReceiveSettings, whose
// NumGoroutines is 10 (the v2 client's, and so the source's, is 1).
const prototypeStreams = 10

// readWithSourceAtPrototypeStreams reads with the source opening as many
// streams per subscription as the prototype does: the comparison with the
// prototype at equal means, since the emulator serves each stream at a
// fixed rate.
func readWithSourceAtPrototypeStreams(ctx context.Context, e *env, c readCase, ps []pair) (float64, error) {
	return readWithSourceConfig(ctx, e, c, ps, pubsubio.ReadConfig{ParallelPullCount: prototypeStreams}, sourceOptions{})
}

// raiseBudgetToStreams raises the buffer budget, where the defaults are
// smaller, to what Pub/Sub's per-stream flow control lets the read's
// streams hold (MaxOutstandingMessages each; the budget is per process and
// Prism runs every split in one): the emulator enforces no such limit, and
// a crossing gives back for redelivery what does not fit (BENCHMARKS.md,
// buffer budget). The raw client and the prototype have no budget at all.
func raiseBudgetToStreams(cfg *pubsubio.ReadConfig, c readCase) {
	streams := c.subs * c.splitsPerSub * max(cfg.ParallelPullCount, 1)
	held := streams * max(cfg.MaxOutstandingMessages, source.DefaultMaxOutstandingMessages)
	cfg.BufferMaxMessages = max(held, source.DefaultBufferMaxMessages)
	cfg.BufferMaxBytes = max(int64(held)*int64(c.size+1024), source.DefaultBufferMaxBytes)
}

// readWithPrototype reads with Beam's examples/native_wordcap/nativepubsubio
// reader, used as a library: one unsplittable reader per subscription, so
// splitsPerSub does not apply to it. It never ends by itself; the run is
// cancelled once every message arrived. It reaches the emulator only
// through PUBSUB_EMULATOR_HOST, set for its run alone.
func readWithPrototype(ctx context.Context, e *env, c readCase, ps []pair) (float64, error) {
	os.Setenv("PUBSUB_EMULATOR_HOST", e.conn.EmulatorEndpoint)
	defer os.Unsetenv("PUBSUB_EMULATOR_HOST")
	run := ps[0].sub.ID + "-proto"
	rc, forget := newRunCount(run, c.total())
	defer forget()
	p, s := beam.NewPipelineWithRoot()
	for _, pr := range ps {
		payloads := nativepubsubio.Read(ctx, s, project, pr.topic.ID, pr.sub.ID)
		endStage(s, beam.ParDo(s, &countPayloadsFn{Run: run}, payloads))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-rc.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := beamx.Run(ctx, p)
	if rate, rerr := rc.rate(); rerr == nil {
		return rate, nil
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return 0, fmt.Errorf("prototype pipeline: %w", err)
	}
	_, rerr := rc.rate()
	return 0, fmt.Errorf("prototype reader: %w", rerr)
}
