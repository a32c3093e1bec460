package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// The pipeline streaming users write: an unbounded Read, fixed event-time
// windows, a count per key per window, Write. The tests feed the
// subscriptions at a steady rate while the job runs, read the counts off
// the output topic, and check that every published message was counted
// once, in its window (none dropped as late), and that each window fired
// once; they print how long after a window's end its results were
// published.

func init() {
	register.Function2x0(keyBySubscription)
	register.Function4x0(windowResult)
}

const (
	windowSize    = 2 * time.Second
	keyAttr       = "key"
	eventTimeAttr = "event_ms" // the publisher's clock, Unix milliseconds
)

// keyBySubscription keys a message by its subscription and key attribute.
func keyBySubscription(m pubsubio.Message, emit func(string)) {
	emit(m.Subscription.ID + "|" + m.Attributes[keyAttr])
}

// windowResult is one window's count of one key, as a message: the count
// as data, key and window start (Unix ms) in attributes.
func windowResult(w beam.Window, key string, n int, emit func(pubsubio.Message)) {
	iw := w.(window.IntervalWindow)
	emit(pubsubio.Message{
		Data:       []byte(strconv.Itoa(n)),
		Attributes: map[string]string{keyAttr: key, "window_ms": strconv.FormatInt(iw.Start.Milliseconds(), 10)},
	})
}

// windowedCounts is Read -> key -> fixed windows -> count -> Write.
func windowedCounts(s beam.Scope, read pubsubio.ReadConfig, out pubsubio.Topic) {
	keyed := beam.ParDo(s, keyBySubscription, pubsubio.Read(s, read))
	counts := stats.Count(s, beam.WindowInto(s, window.NewFixedWindows(windowSize), keyed))
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, Connection: read.Connection}, beam.ParDo(s, windowResult, counts))
}

// windowKey is one key's window: "subscription|key" and the window's start
// in Unix milliseconds.
type windowKey struct {
	key   string
	start int64
}

// windowOf is the key of the window t falls in.
func windowOf(key string, t time.Time) windowKey {
	ms := t.UnixMilli()
	return windowKey{key, ms - ms%windowSize.Milliseconds()}
}

func (k windowKey) end() time.Time { return time.UnixMilli(k.start).Add(windowSize) }

func (k windowKey) String() string {
	return fmt.Sprintf("%s@%s", k.key, time.UnixMilli(k.start).UTC().Format("15:04:05"))
}

// feed is one input topic and how to publish to it.
type feed struct {
	topic pubsubio.Topic
	sub   pubsubio.Subscription // read by the pipeline
	audit pubsubio.Subscription // read by the test, for publish times
	// phases are (rate per second, duration) in turn; rate 0 is silence.
	phases [][2]int
	keys   int
	stamp  bool          // set eventTimeAttr, the pipeline's TimestampAttribute
	behind time.Duration // with stamp: how far the stamps trail the clock
}

// publish runs f's phases and returns how many messages it published.
func (f feed) publish(ctx context.Context, t *testing.T, client *pubsub.Client) int {
	pub := client.Publisher(f.topic.String())
	defer pub.Stop()
	var results []*pubsub.PublishResult
	i := 0
	for _, ph := range f.phases {
		rate, end := ph[0], time.Now().Add(time.Duration(ph[1])*time.Second)
		if rate == 0 {
			time.Sleep(time.Until(end)) // a silence of the publisher: the test's input, not synchronization
			continue
		}
		tick := time.NewTicker(time.Second / time.Duration(rate))
		for time.Now().Before(end) {
			<-tick.C
			attrs := map[string]string{keyAttr: fmt.Sprintf("k%d", i%f.keys)}
			if f.stamp {
				attrs[eventTimeAttr] = strconv.FormatInt(time.Now().Add(-f.behind).UnixMilli(), 10)
			}
			results = append(results, pub.Publish(ctx, &pubsub.Message{Data: []byte(strconv.Itoa(i)), Attributes: attrs}))
			i++
		}
		tick.Stop()
	}
	for j, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Errorf("publishing message %d to %s: %v", j, f.topic, err)
		}
	}
	return len(results)
}

// expected reads f's audit subscription until it has n messages and returns
// the count each window of each key must have: by publish time, or by the
// publisher's timestamp when f stamps them.
func (f feed) expected(t *testing.T, client *pubsub.Client, n int) map[windowKey]int {
	got, _ := receive(t, client, f.audit, n, 2*time.Minute)
	if len(got) != n {
		t.Fatalf("the audit subscription of %s returned %d of %d messages", f.topic, len(got), n)
	}
	want := map[windowKey]int{}
	for _, m := range got {
		at := m.PublishTime
		if f.stamp {
			ms, _ := strconv.ParseInt(m.Attributes[eventTimeAttr], 10, 64)
			at = time.UnixMilli(ms)
		}
		want[windowOf(f.sub.ID+"|"+m.Attributes[keyAttr], at)]++
	}
	return want
}

// results collects the counts the pipeline publishes: every result for a
// window and key, and when it was published.
type results struct {
	mu        sync.Mutex
	counts    map[windowKey][]int
	published map[windowKey]time.Time
	changed   chan struct{}
}

func watchResults(t *testing.T, client *pubsub.Client, sub pubsubio.Subscription) *results {
	r := &results{counts: map[windowKey][]int{}, published: map[windowKey]time.Time{}, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = client.Subscriber(sub.String()).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			ms, _ := strconv.ParseInt(m.Attributes["window_ms"], 10, 64)
			k := windowKey{m.Attributes[keyAttr], ms}
			n, _ := strconv.Atoi(string(m.Data))
			r.mu.Lock()
			defer r.mu.Unlock()
			r.counts[k] = append(r.counts[k], n)
			if _, ok := r.published[k]; !ok {
				r.published[k] = m.PublishTime
			}
			close(r.changed)
			r.changed = make(chan struct{})
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// await waits until every window of want has a result, or timeout passes.
func (r *results) await(want map[windowKey]int, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		missing := 0
		for k := range want {
			if len(r.counts[k]) == 0 {
				missing++
			}
		}
		changed := r.changed
		r.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			return
		}
	}
}

// check fails the test for every window whose count is not want's or that
// fired more than once, and logs each window's latency and a summary.
func (r *results) check(t *testing.T, want map[windowKey]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]windowKey, 0, len(want))
	published, counted := 0, 0
	for k, n := range want {
		keys = append(keys, k)
		published += n
	}
	slices.SortFunc(keys, func(a, b windowKey) int {
		if a.start != b.start {
			return int(a.start - b.start)
		}
		return compareStrings(a.key, b.key)
	})
	var latencies []time.Duration
	for _, k := range keys {
		got := r.counts[k]
		for _, n := range got {
			counted += n
		}
		switch {
		case len(got) == 0:
			t.Errorf("window %v: no result, want a count of %d", k, want[k])
		case len(got) > 1:
			t.Errorf("window %v fired %d times (%v), want once", k, len(got), got)
		case got[0] != want[k]:
			t.Errorf("window %v counted %d, want %d", k, got[0], want[k])
		}
		if p, ok := r.published[k]; ok {
			lat := p.Sub(k.end())
			latencies = append(latencies, lat)
			t.Logf("window %v: %d, published %v after its end", k, want[k], lat.Round(time.Millisecond))
		}
	}
	for k := range r.counts {
		if _, ok := want[k]; !ok {
			t.Errorf("a result for window %v, which no published message falls in", k)
		}
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		t.Logf("WINDOW SUMMARY windows=%d published=%d counted=%d dropped_late=%d latency_p50=%v latency_max=%v",
			len(keys), published, counted, published-counted,
			latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// runWindowedCounts runs the windowed count over feeds with cfg's options
// while the feeds publish, and checks the results.
func runWindowedCounts(t *testing.T, e *emulator.Emulator, cfg pubsubio.ReadConfig, feeds ...feed) {
	client := e.Client(t)
	outTopic := e.CreateTopic(t, "win-out")
	outSub := e.CreateSubscription(t, outTopic, "win-out", 60*time.Second)
	for _, f := range feeds {
		cfg.Subscriptions = append(cfg.Subscriptions, f.sub)
	}
	cfg.Connection = pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	r := watchResults(t, client, outSub)

	p, s := beam.NewPipelineWithRoot()
	windowedCounts(s, cfg, outTopic)
	run := runInBackground(p, 10*time.Minute)
	t.Cleanup(func() { run.cancel(); run.wait(t, time.Minute) })

	published := make([]int, len(feeds))
	var wg sync.WaitGroup
	for i, f := range feeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			published[i] = f.publish(context.Background(), t, client)
		}()
	}
	wg.Wait()
	want := map[windowKey]int{}
	for i, f := range feeds {
		for k, c := range f.expected(t, client, published[i]) {
			want[k] = c
		}
	}
	r.await(want, 2*time.Minute)
	select {
	case <-run.done:
		t.Fatalf("the job ended while it should stream: %v", run.err)
	default:
	}
	r.check(t, want)
}

// newFeed creates a topic, the subscription the pipeline reads and one the
// test audits.
func newFeed(t *testing.T, e *emulator.Emulator, name string, keys int, phases ...[2]int) feed {
	topic := e.CreateTopic(t, name)
	return feed{
		topic:  topic,
		sub:    e.CreateSubscription(t, topic, name, 60*time.Second),
		audit:  e.CreateSubscription(t, topic, name+"-audit", 60*time.Second),
		phases: phases,
		keys:   keys,
	}
}

// Publish time as event time, 200 messages a second for 20 s over 5 keys,
// the read's defaults.
func TestWindowsFireOnceWithTheRightCounts(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	runWindowedCounts(t, e, pubsubio.ReadConfig{}, newFeed(t, e, "win", 5, [2]int{200, 20}))
}

// The same with the event time in an attribute the publisher sets from its
// own clock.
func TestWindowsFireOnTheTimestampAttribute(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	f := newFeed(t, e, "win-ts", 5, [2]int{200, 20})
	f.stamp = true
	runWindowedCounts(t, e, pubsubio.ReadConfig{TimestampAttribute: eventTimeAttr}, f)
}

// Two subscriptions, two splits each: one fed at 200 a second, the other
// at 10, silent for 15 s (over WatermarkIdle) in the middle. No window of
// the slow one may lose a message to the fast one's watermark.
//
// It runs alone, before the parallel tests: after the silence the slow
// split's watermark is now minus WatermarkLateness (1 s), so a message the
// emulator delivers more than 1 s after its publish is late, as
// documented. Beside 7 other tests (load average 17 on 2 cores) the first
// messages after the silence took that long and fired a second pane.
func TestWindowsOverAFastAndASlowSubscription(t *testing.T) {
	e := emulator.Require(t)
	fast := newFeed(t, e, "win-fast", 3, [2]int{200, 30})
	slow := newFeed(t, e, "win-slow", 2, [2]int{10, 8}, [2]int{0, 15}, [2]int{10, 7})
	runWindowedCounts(t, e, pubsubio.ReadConfig{Splits: 4}, fast, slow)
}

// A subscription whose event times trail the clock by 30 s (a consumer
// behind its backlog) beside one that is caught up, both under
// TimestampAttribute: the caught-up split's watermark must not pass the
// lagging split's messages. Prism takes the stage's watermark from the
// latest bundle's residuals, so without the read reporting its slowest
// split the lagging one's messages are late (run once with each split
// reporting its own: 1,321 of 3,000 dropped, 21 windows without a result).
func TestWindowsOverALaggingAndACaughtUpSubscription(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	caughtUp := newFeed(t, e, "win-now", 3, [2]int{100, 15})
	caughtUp.stamp = true
	lagging := newFeed(t, e, "win-late", 3, [2]int{100, 15})
	lagging.stamp, lagging.behind = true, 30*time.Second
	runWindowedCounts(t, e, pubsubio.ReadConfig{TimestampAttribute: eventTimeAttr}, caughtUp, lagging)
}
