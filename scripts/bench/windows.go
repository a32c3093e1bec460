package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamwindow "github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// The windows case: how long after a window of event time ends its result
// is published, by a Read -> 2 s fixed windows -> Count -> Write pipeline
// at the read's defaults, fed at a steady rate, and fed the same way
// behind a backlog it drains. Event times are the publisher's clock in an
// attribute, so each window's count is checked against what was
// published into it: a shortfall is messages dropped as late.

func init() {
	register.Function1x1(windowsKey)
	register.DoFn4x0[beam.Window, string, int, func(pubsubio.Message)](&windowFired{})
}

const (
	windowsSize     = 2 * time.Second
	windowsTimeAttr = "bench_event_ms"
)

func windowsKey(pubsubio.Message) string { return "all" }

// windowFired publishes one window's count, with the window's end.
type windowFired struct{ Out pubsubio.Topic }

func (f *windowFired) ProcessElement(w beam.Window, _ string, n int, emit func(pubsubio.Message)) {
	end := w.(beamwindow.IntervalWindow).End.ToTime()
	emit(pubsubio.Message{Data: []byte(strconv.Itoa(n)), Attributes: map[string]string{"window_end_ms": strconv.FormatInt(end.UnixMilli(), 10)}, Topic: f.Out})
}

// windowsResult is one run: the latency (result published minus window
// end) of each window the feed published into, and how many messages the
// windows missed.
type windowsResult struct {
	name      string
	latencies []time.Duration // sorted
	windows   int
	missed    int           // published into a window, not in its count: dropped as late
	drain     time.Duration // from the feed's start to the backlog's last window firing
}

func (r windowsResult) String() string {
	if len(r.latencies) == 0 {
		return fmt.Sprintf("%-28s no window fired", r.name)
	}
	s := fmt.Sprintf("%-28s windows %3d  end to result p50 %6v  p99 %6v  max %6v  missed %d",
		r.name, r.windows, percentile(r.latencies, 0.5).Round(time.Millisecond), percentile(r.latencies, 0.99).Round(time.Millisecond),
		r.latencies[len(r.latencies)-1].Round(time.Millisecond), r.missed)
	if r.drain > 0 {
		s += fmt.Sprintf("  (the backlog's windows fired within %v of the feed's start)", r.drain.Round(100*time.Millisecond))
	}
	return s
}

// measureWindows runs the steady case, then the backlog case.
func measureWindows(ctx context.Context, e *env, rate, seconds, backlog int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nwindows: Read -> 2 s fixed windows -> Count -> Write on Prism, fed %d msg/s for %d s, read's defaults\n", rate, seconds)
	for _, c := range []struct {
		name    string
		backlog int
	}{{"steady", 0}, {fmt.Sprintf("behind a backlog of %d", backlog), backlog}} {
		r, err := runWindows(ctx, e, c.name, rate, seconds, c.backlog)
		if err != nil {
			return "", fmt.Errorf("windows, %s: %w", c.name, err)
		}
		fmt.Println(r)
		fmt.Fprintln(&b, r)
	}
	return b.String(), nil
}

func runWindows(ctx context.Context, e *env, name string, rate, seconds, backlog int) (windowsResult, error) {
	res := windowsResult{name: name}
	ps, err := e.newPairs(ctx, "win", 2)
	if err != nil {
		return res, err
	}
	defer e.drop(ctx, ps)
	in, out := ps[0], ps[1]

	want := map[int64]int{} // by window end, Unix ms
	pub := e.client.Publisher(in.topic.String())
	defer pub.Stop()
	var results []*pubsub.PublishResult
	publish := func() {
		now := time.Now()
		end := now.Truncate(windowsSize).Add(windowsSize).UnixMilli()
		want[end]++
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: []byte("x"), Attributes: map[string]string{windowsTimeAttr: strconv.FormatInt(now.UnixMilli(), 10)}}))
	}
	for range backlog {
		publish()
	}
	var backlogEnd int64 // the last window the backlog published into
	for end := range want {
		backlogEnd = max(backlogEnd, end)
	}

	var mu sync.Mutex
	got := map[int64]int{}
	fired := map[int64]time.Time{}
	arrived := make(chan struct{}, 1)
	rctx, stopReceive := context.WithCancel(ctx)
	defer stopReceive()
	go e.client.Subscriber(out.sub.String()).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		end, _ := strconv.ParseInt(m.Attributes["window_end_ms"], 10, 64)
		n, _ := strconv.Atoi(string(m.Data))
		mu.Lock()
		defer mu.Unlock()
		got[end] += n
		if _, ok := fired[end]; !ok {
			fired[end] = m.PublishTime
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
	})

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{in.sub}, TimestampAttribute: windowsTimeAttr, Connection: e.conn})
	counts := stats.Count(s, beam.WindowInto(s, beamwindow.NewFixedWindows(windowsSize), beam.ParDo(s, windowsKey, msgs)))
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: out.topic, Connection: e.conn}, beam.ParDo(s, &windowFired{Out: out.topic}, counts))
	pctx, cancel := context.WithCancel(ctx)
	pipeErr := make(chan error, 1)
	go func() { _, err := beamx.RunWithMetrics(pctx, p); pipeErr <- err }()
	defer func() { cancel(); <-pipeErr }()

	start := time.Now()
	for i := range rate * seconds {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		publish()
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			return res, err
		}
	}
	// Every window with messages fires once the watermark passes it; wait
	// for the last one, bounded.
	last := slices.Max(slices.Collect(maps.Keys(want)))
	deadline := time.After(2 * time.Minute)
	for {
		mu.Lock()
		_, done := fired[last]
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-arrived:
		case err := <-pipeErr:
			return res, fmt.Errorf("the pipeline ended: %v", err)
		case <-deadline:
			return res, fmt.Errorf("the last window (ending %v) did not fire within 2 minutes", time.UnixMilli(last))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for end, n := range want {
		at, ok := fired[end]
		if !ok {
			res.missed += n
			continue
		}
		res.windows++
		res.missed += max(n-got[end], 0)
		if end > backlogEnd {
			res.latencies = append(res.latencies, at.Sub(time.UnixMilli(end)))
		} else if d := at.Sub(start); d > res.drain {
			res.drain = d // a backlog window: fired once the drain passed it
		}
	}
	slices.Sort(res.latencies)
	return res, nil
}
