package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/faultproxy"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Streaming-pull streams broken during a read: the read goes through the
// fault proxy, which closes every connection of the job as the read
// progresses (startProxy and the fault tests' conventions are in
// helper_test.go).

func init() {
	register.DoFn1x1[pubsubio.Message, error](&commitProbeFn{})
}

// drop is one DropAll during a read and what followed it.
type drop struct {
	at        int           // messages emitted when it happened
	closed    int           // connections it closed
	reconnect time.Duration // until the proxy accepted a new connection
	recovered time.Duration // until more was emitted than the split could hold at the drop
}

func (d drop) String() string {
	return fmt.Sprintf("at %d: closed %d, reconnected in %v, new messages in %v",
		d.at, d.closed, d.reconnect.Round(time.Millisecond), d.recovered.Round(time.Millisecond))
}

// dropAt breaks every connection of the job once at least `at` messages
// were emitted, then waits for the split to recover: for a new connection
// and for more than `held` further messages, which is more than the client
// can have held before the drop (its flow control), so some were received
// after it.
func dropAt(t *testing.T, r *pipelineRun, proxy *faultproxy.Proxy, bucket string, at, held int) drop {
	t.Helper()
	awaitProgress(t, r, bucket, at, time.Minute)
	d := drop{at: collect.Len(bucket)}
	accepted := proxy.Stats().Accepted
	start := time.Now()
	d.closed = proxy.DropAll()
	if d.closed == 0 {
		t.Fatalf("drop at %d messages: the proxy had no open connection to break (stats %+v)", d.at, proxy.Stats())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proxy.Await(ctx, func(s faultproxy.Stats) bool { return s.Accepted > accepted }); err != nil {
		t.Fatalf("drop at %d messages: the connector did not reconnect: %v", d.at, err)
	}
	d.reconnect = time.Since(start)
	awaitProgress(t, r, bucket, d.at+held+1, time.Minute)
	d.recovered = time.Since(start)
	return d
}

// brokenStreamsConfig is a read through proxy whose client holds few
// messages, so that the stream is still pulling when the drops land.
func brokenStreamsConfig(sub pubsubio.Subscription, proxy *faultproxy.Proxy, outstanding int) pubsubio.ReadConfig {
	return pubsubio.ReadConfig{
		Subscriptions:          []pubsubio.Subscription{sub},
		MaxOutstandingMessages: outstanding,
		MaxRecordsPerBundle:    outstanding / 2,
		// Bounds redelivery of a message whose ack a drop lost.
		MaxDurationPerAckExtension: 10 * time.Second,
		// Bounded by idleness only: duplicates would end a MaxMessages read
		// early. Far longer than a reconnect (tens of milliseconds).
		IdleTimeout: 10 * time.Second,
		LeaseIdle:   time.Second,
		Connection:  pubsubio.Connection{EmulatorEndpoint: proxy.Addr()},
	}
}

// brokenStreamsNote: the broken-stream tests run on pstest, not on the Java
// emulator. Measured with the raw Go client (no connector): after the proxy
// closed the connection carrying a streaming pull, the emulator delivered
// nothing more of the backlog for 40 to 90 s (the whole observation), to
// the reconnected stream and to a fresh client alike, with a 10 s ack
// deadline; pstest, under the same drops, delivered everything.

// (a) Streaming-pull streams broken mid-read: a bounded read of 1,000
// messages through the proxy, which closes every connection of the job
// four times as the read progresses. The source recovers each time, the
// read ends by itself, every message is emitted, and every message is acked
// on the server by the end.
func TestFaultBrokenStreamsReadRecovers(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	proxy := startProxy(t, e.Endpoint)
	const n, outstanding = 1000, 50
	topic := e.CreateTopic(t, "fault-streams")
	sub := e.CreateSubscription(t, topic, "fault-streams", 10*time.Second)
	ids := e.Publish(t, topic, n, 256, nil)

	p, bucket := readInto(t, brokenStreamsConfig(sub, proxy, outstanding), nil)
	run := runInBackground(p, 3*time.Minute)
	for _, at := range []int{200, 400, 600, 800} {
		t.Logf("drop %v", dropAt(t, run, proxy, bucket, at, outstanding))
	}
	run.wait(t, 3*time.Minute)
	if run.err != nil {
		t.Fatalf("the read failed after %v; want it to recover from every drop: %v", run.took, run.err)
	}
	_, dups := readCheck(t, "read with broken streams", sub, ids, tally(t, bucket))
	unacked := 0
	for _, id := range ids {
		if srv.Message(id).Acks == 0 {
			unacked++
		}
	}
	if unacked > 0 {
		t.Errorf("%d of %d messages never acked by a read that finished", unacked, n)
	}
	if got := gauge(run.res, "pending_acks"); got != 0 {
		t.Errorf("pending_acks %d after a finished bounded read, want 0", got)
	}
	t.Logf("read %d messages in %v: %d duplicates emitted; proxy %+v", n, run.took.Round(time.Millisecond), dups, proxy.Stats())
	t.Logf("metrics: %s", sourceMetrics(run.res))
}

// sourceMetrics formats every non-zero pubsubio counter of a job, for logs.
func sourceMetrics(res beam.PipelineResult) string {
	var parts []string
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == pubsubio.MetricsNamespace && c.Result() != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", c.Name(), c.Result()))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// commitProbeFn records, per test, which messages were in bundles it
// finished and which were in the bundle it failed on purpose: once armed,
// it fails the next bundle that reaches it, so that bundle never commits.
type commitProbeFn struct {
	Name string

	ids []string // this bundle's, so far
}

type commitProbe struct {
	armed atomic.Bool

	mu       sync.Mutex
	finished map[string]bool // message IDs in bundles whose FinishBundle ran
	failed   []string        // message IDs of the bundle failed on purpose
}

var commitProbes sync.Map // name -> *commitProbe

func probeFor(name string) *commitProbe {
	p, _ := commitProbes.LoadOrStore(name, &commitProbe{finished: map[string]bool{}})
	return p.(*commitProbe)
}

func (f *commitProbeFn) StartBundle() { f.ids = f.ids[:0] }

func (f *commitProbeFn) ProcessElement(m pubsubio.Message) error {
	f.ids = append(f.ids, m.ID)
	probe := probeFor(f.Name)
	if probe.armed.Load() {
		probe.mu.Lock()
		defer probe.mu.Unlock()
		if probe.failed == nil {
			probe.failed = append([]string(nil), f.ids...)
		}
		return fmt.Errorf("failing this bundle on purpose after the drops (message %s)", m.ID)
	}
	return nil
}

func (f *commitProbeFn) FinishBundle() {
	probe := probeFor(f.Name)
	probe.mu.Lock()
	defer probe.mu.Unlock()
	for _, id := range f.ids {
		probe.finished[id] = true
	}
}

// (a) Nothing acked early while streams break: the same read with three
// drops, then a downstream failure that fails the job. What the failed
// bundle held never committed, so it must not have been acked: a second
// read, straight from the emulator, must see every one of those messages,
// and every message the first job did not finish; by its end every
// message is acked on the server (pstest counts acks per message).
func TestFaultBrokenStreamsAckOnlyCommitted(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	proxy := startProxy(t, e.Endpoint)
	const n, outstanding = 600, 50
	topic := e.CreateTopic(t, "fault-commit")
	sub := e.CreateSubscription(t, topic, "fault-commit", 10*time.Second)
	ids := e.Publish(t, topic, n, 256, nil)

	name := t.Name()
	probe := probeFor(name)
	t.Cleanup(func() { commitProbes.Delete(name) })
	firstCfg := brokenStreamsConfig(sub, proxy, outstanding)
	// What the failed job's split still holds goes back when the split is
	// released, LeaseIdle after its last bundle, or at the latest when the
	// hold bound gives it back. In one CI run the split was never released
	// (its connection stayed open to the end): the hold bound is then what
	// returns the messages, and the second read idles long enough for it.
	firstCfg.MaxExtension = 15 * time.Second
	p, first := readInto(t, firstCfg, func(s beam.Scope, msgs beam.PCollection) {
		beam.ParDo0(s, &commitProbeFn{Name: name}, msgs)
	})
	run := runInBackground(p, 3*time.Minute)
	for _, at := range []int{100, 250, 400} {
		t.Logf("drop %v", dropAt(t, run, proxy, first, at, outstanding))
	}
	probe.armed.Store(true)
	run.wait(t, 3*time.Minute)
	if run.err == nil {
		t.Fatalf("the first job succeeded; its probe was armed after %d of %d messages and should have failed a bundle", collect.Len(first), n)
	}
	probe.mu.Lock()
	failed, finished := probe.failed, len(probe.finished)
	probe.mu.Unlock()
	if len(failed) == 0 {
		t.Fatalf("the first job failed without the probe failing a bundle: %v", run.err)
	}
	t.Logf("first job: emitted %d, failed after %v with a bundle of %d messages; %d distinct messages in finished bundles",
		collect.Len(first), run.took.Round(time.Millisecond), len(failed), finished)

	cfg := brokenStreamsConfig(sub, proxy, outstanding)
	cfg.Connection = pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	cfg.MaxOutstandingMessages, cfg.MaxRecordsPerBundle = 0, 0
	cfg.IdleTimeout = firstCfg.MaxExtension + 2*firstCfg.MaxDurationPerAckExtension
	p, second := readInto(t, cfg, nil)
	res, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("second read failed: %v", err)
	}
	again := tally(t, second)
	var ackedEarly []string
	for _, id := range failed {
		if !probe.finished[id] && again[sub.ID+"/"+id] == 0 {
			ackedEarly = append(ackedEarly, id)
		}
	}
	if len(ackedEarly) > 0 {
		sort.Strings(ackedEarly)
		t.Errorf("%d of the %d messages of the failed bundle never came back, so they were acked before their bundle committed: %v",
			len(ackedEarly), len(failed), ackedEarly[:min(10, len(ackedEarly))])
	}
	var lost []string
	redelivered, unacked := 0, 0
	for _, id := range ids {
		inSecond := again[sub.ID+"/"+id]
		if probe.finished[id] && inSecond > 0 {
			redelivered++
		}
		if !probe.finished[id] && inSecond == 0 {
			lost = append(lost, id)
		}
		if srv.Message(id).Acks == 0 {
			unacked++
		}
	}
	if unacked > 0 {
		t.Errorf("%d of %d messages never acked after both jobs", unacked, n)
	}
	if len(lost) > 0 {
		t.Errorf("%d messages neither in a finished bundle of the first job nor read by the second, e.g. %v", len(lost), lost[:min(5, len(lost))])
	}
	t.Logf("second job: emitted %d (%d of them already finished by the first job); messages_acked %d; proxy %+v",
		collect.Len(second), redelivered, counter(res, "messages_acked"), proxy.Stats())
}
