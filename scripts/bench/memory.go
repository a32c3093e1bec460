package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

func init() {
	register.DoFn2x0[pubsubio.Message, func(int)](&stallFn{})
}

// heldMessages is how many messages the memory case holds in flight.
const heldMessages = 10000

// memoryResult is the process's RSS growth while heldMessages are held.
type memoryResult struct {
	name      string
	pubsubio  int64 // bytes over the baseline, peak
	raw       int64
	holdFor   time.Duration
	msgSizeKB int
}

func (r memoryResult) String() string {
	return fmt.Sprintf("| %s | %d KiB | %.1f MiB | %.1f MiB | %.2f |",
		r.name, r.msgSizeKB, float64(r.pubsubio)/(1<<20), float64(r.raw)/(1<<20), float64(r.pubsubio)/float64(r.raw))
}

// stall holds the memory case's downstream until released.
var stall struct {
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

// stallFn blocks the bundle on its first message until the case releases
// it: the source then holds what its budget allows.
type stallFn struct{}

func (f *stallFn) ProcessElement(pubsubio.Message, func(int)) {
	stall.once.Do(func() { close(stall.started) })
	<-stall.release
}

// rss reads this process's resident set size.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakGrowth returns a function that stops sampling RSS every 20 ms and
// reports the peak over the baseline taken now, after a full collection.
func peakGrowth() func() int64 {
	debug.FreeOSMemory()
	base := rss()
	peak := samplePeak(20*time.Millisecond, rss)
	return func() int64 { return peak() - base }
}

// samplePeak calls sample now and then every every until the returned
// function is called, which returns the highest value sampled.
func samplePeak(every time.Duration, sample func() int64) (peak func() int64) {
	var highest int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			highest = max(highest, sample())
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(stop); <-done; return highest }
}

// measureMemory holds heldMessages in flight in the source and in the sink,
// each next to the raw client holding as many.
func measureMemory(ctx context.Context, e *env, size int, hold time.Duration) ([]memoryResult, error) {
	src := memoryResult{name: fmt.Sprintf("source: %d buffered behind a stalled downstream", heldMessages), holdFor: hold, msgSizeKB: size >> 10}
	var err error
	if src.pubsubio, err = sourceHolding(ctx, e, size, hold); err != nil {
		return nil, err
	}
	if src.raw, err = rawSubscriberHolding(ctx, e, size, hold); err != nil {
		return nil, err
	}
	snk := memoryResult{name: fmt.Sprintf("sink: %d in flight (publishing 10x as many)", heldMessages), msgSizeKB: size >> 10}
	if snk.pubsubio, err = sinkHolding(ctx, e, size); err != nil {
		return nil, err
	}
	if snk.raw, err = rawPublisherHolding(ctx, e, size); err != nil {
		return nil, err
	}
	return []memoryResult{src, snk}, nil
}

// sourceHolding reads a backlog larger than the source's buffer budget
// (heldMessages) into a downstream stalled on its first message, and
// samples the peak while the stall holds.
func sourceHolding(ctx context.Context, e *env, size int, hold time.Duration) (int64, error) {
	ps, err := e.newPairs(ctx, "mem", 1)
	if err != nil {
		return 0, err
	}
	defer e.drop(ctx, ps)
	if err := e.backlog(ctx, ps, heldMessages*3/2, size); err != nil {
		return 0, err
	}
	stall.once, stall.started, stall.release = sync.Once{}, make(chan struct{}), make(chan struct{})
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions:     subsOf(ps),
		BufferMaxMessages: heldMessages,
		BufferMaxBytes:    1 << 30,
		// No client limit: flow control must not be what stops the pull,
		// and without one no delivery waits for room (source/budget.go),
		// so the budget alone bounds what is held.
		MaxOutstandingMessages: -1,
		IdleTimeout:            5 * time.Second,
		Connection:             e.conn,
	})
	endStage(s, beam.ParDo(s, &stallFn{}, msgs))
	peak := peakGrowth()
	errc := make(chan error, 1)
	go func() { errc <- beamx.Run(ctx, p) }()
	select {
	case <-stall.started:
	case err := <-errc:
		return 0, fmt.Errorf("source pipeline ended before its first message: %v", err)
	}
	time.Sleep(hold) // the figure is the peak over this window, not a synchronization
	growth := peak()
	close(stall.release)
	if err := <-errc; err != nil {
		return 0, fmt.Errorf("source pipeline: %w", err)
	}
	return growth, nil
}

// rawSubscriberHolding holds heldMessages unacked in a raw Receive.
func rawSubscriberHolding(ctx context.Context, e *env, size int, hold time.Duration) (int64, error) {
	ps, err := e.newPairs(ctx, "memraw", 1)
	if err != nil {
		return 0, err
	}
	defer e.drop(ctx, ps)
	if err := e.backlog(ctx, ps, heldMessages*3/2, size); err != nil {
		return 0, err
	}
	peak := peakGrowth()
	rctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var held []*pubsub.Message
	full := make(chan struct{})
	sub := e.client.Subscriber(ps[0].sub.String())
	sub.ReceiveSettings = receiveSettings
	sub.ReceiveSettings.MaxOutstandingMessages = heldMessages
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			mu.Lock()
			defer mu.Unlock()
			if held = append(held, m); len(held) == heldMessages {
				close(full)
			}
		})
	}()
	select {
	case <-full:
	case <-time.After(2 * time.Minute):
		cancel()
		return 0, fmt.Errorf("raw subscriber held only %d of %d messages", len(held), heldMessages)
	}
	time.Sleep(hold)
	growth := peak()
	mu.Lock()
	for _, m := range held {
		m.Nack()
	}
	mu.Unlock()
	cancel()
	<-done
	return growth, nil
}

// sinkHolding publishes 10x heldMessages through a sink capped at
// heldMessages in flight: a generator faster than the emulator keeps it at
// the cap.
func sinkHolding(ctx context.Context, e *env, size int) (int64, error) {
	ps, err := e.newPairs(ctx, "memw", 1)
	if err != nil {
		return 0, err
	}
	defer e.drop(ctx, ps)
	peak := peakGrowth()
	_, err = writeWithSinkConfig(ctx, e, writeCase{size: size, topics: 1, messages: heldMessages * 10}, ps,
		pubsubio.WriteConfig{MaxInFlightMessages: heldMessages, MaxInFlightBytes: 1 << 30})
	return peak(), err
}

// rawPublisherHolding is sinkHolding with a raw Publisher whose flow
// control blocks at heldMessages outstanding.
func rawPublisherHolding(ctx context.Context, e *env, size int) (int64, error) {
	ps, err := e.newPairs(ctx, "memwraw", 1)
	if err != nil {
		return 0, err
	}
	defer e.drop(ctx, ps)
	peak := peakGrowth()
	pub := e.client.Publisher(ps[0].topic.String())
	pub.PublishSettings.FlowControlSettings = pubsub.FlowControlSettings{
		MaxOutstandingMessages: heldMessages, MaxOutstandingBytes: 1 << 30, LimitExceededBehavior: pubsub.FlowControlBlock,
	}
	n := heldMessages * 10
	// Results are awaited as they come, so the baseline holds no more of
	// them than the sink does.
	results := make(chan *pubsub.PublishResult, n)
	failed := make(chan error, 1)
	go func() {
		defer close(failed)
		for r := range results {
			if _, err := r.Get(ctx); err != nil {
				failed <- err
				return
			}
		}
	}()
	for i := range n {
		results <- pub.Publish(ctx, &pubsub.Message{Data: emulator.Payload(i, size)})
	}
	close(results)
	if err := <-failed; err != nil {
		pub.Stop()
		return 0, err
	}
	pub.Stop()
	return peak(), nil
}
