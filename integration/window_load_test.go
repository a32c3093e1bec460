package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Windows under sustained load: a backlog of 20 s of event time read with
// 2 s windows, then a feed near the read's pace for a minute, so that the
// flow-control window is full at the end of nearly every bundle. Every
// window must fire once with its exact count, and the backlog's windows
// must fire while the load lasts: a watermark that waits for the window to
// empty fires nothing until the feed stops. Event times are the
// publisher's clock, in an attribute, so what each window must count is
// known from what was published.

func init() {
	register.DoFn3x0[beam.EventTime, pubsubio.Message, func(pubsubio.Message)](&aheadOfTheClock{})
}

const (
	loadBacklog     = 20_000
	loadBacklogRate = 1_000 // published before the pipeline starts: 20 s of event time
	loadRate        = 1_500 // messages a second, then: the read keeps up, the window fills
	loadDuration    = 60 * time.Second
	loadKeys        = 5
)

// aheadOfTheClock passes on, to Out, the messages whose event time is more
// than ten minutes after they are read: the one the skewed test stamps an
// hour ahead, whose window fires long after the test.
type aheadOfTheClock struct{ Out pubsubio.Topic }

func (f *aheadOfTheClock) ProcessElement(et beam.EventTime, m pubsubio.Message, emit func(pubsubio.Message)) {
	if et.ToTime().After(time.Now().Add(10 * time.Minute)) {
		emit(pubsubio.Message{Data: []byte(m.ID), Topic: f.Out})
	}
}

// loadRun is one run of the load test: its topics, and what was published
// into which window.
type loadRun struct {
	e                   *emulator.Emulator
	client              *pubsub.Client
	in                  pubsubio.Topic
	sub                 pubsubio.Subscription
	out, dead, ahead    pubsubio.Subscription
	outT, deadT, aheadT pubsubio.Topic
	want                map[windowKey]int
	published           int
}

func newLoadRun(t *testing.T) *loadRun {
	e := emulator.Require(t)
	r := &loadRun{e: e, client: e.Client(t), want: map[windowKey]int{}}
	r.in = e.CreateTopic(t, "load")
	r.sub = e.CreateSubscription(t, r.in, "load", 60*time.Second)
	for _, o := range []struct {
		topic *pubsubio.Topic
		sub   *pubsubio.Subscription
		name  string
	}{{&r.outT, &r.out, "load-out"}, {&r.deadT, &r.dead, "load-dead"}, {&r.aheadT, &r.ahead, "load-ahead"}} {
		*o.topic = e.CreateTopic(t, o.name)
		*o.sub = e.CreateSubscription(t, *o.topic, o.name, 60*time.Second)
	}
	return r
}

// pipeline is Read -> key -> 2 s windows -> count -> Write, with the read's
// dead letters to r.deadT and the messages read far ahead of the clock to
// r.aheadT.
func (r *loadRun) pipeline(late pubsubio.LatePolicy) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	conn := pubsubio.Connection{EmulatorEndpoint: r.e.Endpoint}
	msgs, dead := pubsubio.ReadWithDeadLetters(s, pubsubio.ReadConfig{
		Subscriptions:      []pubsubio.Subscription{r.sub},
		TimestampAttribute: eventTimeAttr,
		LatePolicy:         late,
		Connection:         conn,
	})
	keyed := beam.ParDo(s, keyBySubscription, msgs)
	counts := stats.Count(s, beam.WindowInto(s, window.NewFixedWindows(windowSize), keyed))
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: r.outT, Connection: conn}, beam.ParDo(s, windowResult, counts))
	pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{Topic: r.deadT, Connection: conn}, dead)
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: r.aheadT, Connection: conn}, beam.ParDo(s, &aheadOfTheClock{Out: r.aheadT}, msgs))
	return p
}

// publish publishes n messages stamped with the clock at rate a second,
// counting each into its window, and calls extra once, a quarter of the
// way through.
func (r *loadRun) publish(ctx context.Context, t *testing.T, n, rate int, extra func(*pubsub.Publisher) []*pubsub.PublishResult) {
	pub := r.client.Publisher(r.in.String())
	defer pub.Stop()
	var results []*pubsub.PublishResult
	const perTick = 10
	tick := time.NewTicker(time.Second * perTick / time.Duration(rate))
	defer tick.Stop()
	for i := range n {
		if i%perTick == 0 {
			<-tick.C
		}
		if i == n/4 && extra != nil {
			results = append(results, extra(pub)...)
		}
		key := fmt.Sprintf("k%d", i%loadKeys)
		now := time.Now()
		results = append(results, pub.Publish(ctx, &pubsub.Message{
			Data:       []byte(strconv.Itoa(r.published + i)),
			Attributes: map[string]string{keyAttr: key, eventTimeAttr: strconv.FormatInt(now.UnixMilli(), 10)},
		}))
		r.want[windowOf(r.sub.ID+"|"+key, time.UnixMilli(now.UnixMilli()))]++
	}
	r.published += n
	for i, res := range results {
		if _, err := res.Get(ctx); err != nil {
			t.Fatalf("publishing message %d of %d: %v", i, len(results), err)
		}
	}
}

// run publishes the backlog, starts the pipeline, feeds it for
// loadDuration, and checks the windows; extra is published a quarter of
// the way through the feed. It returns the job's late_messages.
func (r *loadRun) run(t *testing.T, late pubsubio.LatePolicy, extra func(*pubsub.Publisher) []*pubsub.PublishResult) int64 {
	ctx := context.Background()
	results := watchResults(t, r.client, r.out)
	start := time.Now()
	r.publish(ctx, t, loadBacklog, loadBacklogRate, nil)
	backlog := maps.Clone(r.want)
	t.Logf("backlog of %d messages published in %v, over %d windows", loadBacklog, time.Since(start).Round(time.Millisecond), len(backlog))

	run := runInBackground(r.pipeline(late), 10*time.Minute)
	t.Cleanup(func() { run.cancel(); run.wait(t, time.Minute) })
	feedStart := time.Now()
	r.publish(ctx, t, int(loadDuration/time.Second)*loadRate, loadRate, extra)
	feedEnd := time.Now()
	t.Logf("fed %d messages a second for %v", loadRate, feedEnd.Sub(feedStart).Round(time.Millisecond))

	results.await(r.want, 3*time.Minute)
	select {
	case <-run.done:
		t.Fatalf("the job ended while it should stream: %v", run.err)
	default:
	}
	results.check(t, r.want)
	r.checkFiredDuringTheLoad(t, results, backlog, feedStart, feedEnd)
	return jobCounter(t, r.sub.ID, "late_messages")
}

// firedWithin is how long after its end every window must have fired while
// the feed lasts: twice the backlog's age, the largest lag the watermark
// allows for. A watermark that waits for the flow-control window to empty,
// or that a late message stalls for WatermarkWindow, misses it.
const firedWithin = 40 * time.Second

// checkFiredDuringTheLoad logs when the backlog's windows fired, relative
// to the start of the feed, and fails the test for each window that ended
// firedWithin before the feed did and fired only after it.
func (r *loadRun) checkFiredDuringTheLoad(t *testing.T, res *results, backlog map[windowKey]int, feedStart, feedEnd time.Time) {
	res.mu.Lock()
	defer res.mu.Unlock()
	var fired []time.Duration
	for k := range backlog {
		if p, ok := res.published[k]; ok {
			fired = append(fired, p.Sub(feedStart))
		}
	}
	if len(fired) > 0 {
		slices.Sort(fired)
		t.Logf("WATERMARK PROGRESS backlog windows fired at %v to %v after the feed started (it lasted %v)",
			fired[0].Round(time.Millisecond), fired[len(fired)-1].Round(time.Millisecond), feedEnd.Sub(feedStart).Round(time.Millisecond))
	}
	var slow []string
	for k := range r.want {
		if p, ok := res.published[k]; ok && k.end().Before(feedEnd.Add(-firedWithin)) && p.After(feedEnd) {
			slow = append(slow, fmt.Sprintf("%v (%v after its end)", k, p.Sub(k.end()).Round(time.Millisecond)))
		}
	}
	if len(slow) > 0 {
		slices.Sort(slow)
		t.Errorf("%d windows that ended %v before the feed did fired only after it, e.g. %v: the watermark stalled under load", len(slow), firedWithin, slow[:min(3, len(slow))])
	}
}

// A backlog, then a steady feed: every window once, exactly, none late.
func TestWindowsUnderSustainedLoad(t *testing.T) {
	t.Parallel()
	r := newLoadRun(t)
	if late := r.run(t, pubsubio.LateEmit, nil); late != 0 {
		t.Errorf("late_messages = %d, want 0", late)
	}
}

// The same with two messages a skewed producer stamps a quarter of the way
// through the feed: one an hour ahead of the clock, one at Beam's minimum timestamp
// (what Write stamps for an element at that time). Every other window
// still fires on time with its count; the first is emitted (its window
// fires in an hour), the second is late and goes to the dead letters
// under LateDeadLetter.
func TestWindowsUnderLoadSurviveSkewedStamps(t *testing.T) {
	t.Parallel()
	r := newLoadRun(t)
	var aheadID, minID string
	skewed := func(pub *pubsub.Publisher) []*pubsub.PublishResult {
		stamp := func(ms int64) *pubsub.PublishResult {
			return pub.Publish(context.Background(), &pubsub.Message{
				Data:       []byte("skewed"),
				Attributes: map[string]string{keyAttr: "skewed", eventTimeAttr: strconv.FormatInt(ms, 10)},
			})
		}
		ahead, min := stamp(time.Now().Add(time.Hour).UnixMilli()), stamp(mtime.MinTimestamp.Milliseconds())
		var err error
		if aheadID, err = ahead.Get(context.Background()); err == nil {
			minID, err = min.Get(context.Background())
		}
		if err != nil {
			t.Errorf("publishing the skewed messages: %v", err)
		}
		return nil
	}
	if late := r.run(t, pubsubio.LateDeadLetter, skewed); late != 1 {
		t.Errorf("late_messages = %d, want 1 (the message at the minimum timestamp)", late)
	}
	dead := receiveAll(t, r.client, r.dead, 1, time.Minute)
	for _, m := range dead {
		f, err := dlq.Decode(model.Message{ID: m.ID, Data: m.Data, Attributes: m.Attributes})
		if err != nil {
			t.Fatalf("dead letter %s: %v", m.ID, err)
		}
		if f.Message.ID != minID || f.Stage != pubsubio.StageLate {
			t.Errorf("dead letter of message %s at stage %s (%s), want %s at stage late", f.Message.ID, f.Stage, f.Error, minID)
		}
	}
	for _, m := range receiveAll(t, r.client, r.ahead, 1, time.Minute) {
		if string(m.Data) != aheadID {
			t.Errorf("read far ahead of the clock: message %s, want only %s", m.Data, aheadID)
		}
	}
}

// jobCounter returns the pubsubio counter name of the running job that
// mentions marker (findJob), as the job server sums it from the job's
// finished bundles.
func jobCounter(t *testing.T, marker, name string) int64 {
	t.Helper()
	jobs, job := findJob(marker)
	if job == "" {
		t.Fatalf("no running job to read %s of", name)
	}
	defer func() { _ = jobs.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := jobs.Metrics(ctx, job, "pubsubio")
	if err != nil {
		t.Fatalf("metrics of job %s: %v", job, err)
	}
	return m[name]
}
