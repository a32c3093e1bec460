package integration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/faultproxy"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Fault tests: the connector reaches the emulator through a loopback TCP
// proxy (integration/faultproxy) that breaks, refuses or stalls its
// connections on command, while the test's own admin, publish and
// verification clients talk to the emulator directly. Faults are triggered
// on progress (after so many messages were emitted, at the n-th element of a
// bundle), never on a timer alone, so each run breaks the same phase of the
// job.

func init() {
	register.DoFn1x1[pubsubio.Message, error](&commitProbeFn{})
	register.DoFn2x0[pubsubio.Message, func(pubsubio.Message)](&faultAtFn{})
}

// startProxy starts a fault proxy in front of target, closed when the test
// ends.
func startProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing the fault proxy: %v", err)
		}
	})
	return p
}

// pipelineRun is a job running in the background.
type pipelineRun struct {
	done  chan struct{}
	res   beam.PipelineResult
	err   error
	start time.Time
	took  time.Duration
}

// runInBackground runs p with metrics, bounded by timeout.
func runInBackground(p *beam.Pipeline, timeout time.Duration) *pipelineRun {
	r := &pipelineRun{done: make(chan struct{}), start: time.Now()}
	go func() {
		defer close(r.done)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r.res, r.err = beamx.RunWithMetrics(ctx, p)
		r.took = time.Since(r.start)
	}()
	return r
}

// wait returns once the job ended, failing the test if it outlives budget.
func (r *pipelineRun) wait(t *testing.T, budget time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(budget):
		t.Fatalf("the job did not end within %v", budget)
	}
}

// awaitProgress waits until bucket holds at least n elements; the job
// ending first is reported with its result.
func awaitProgress(t *testing.T, r *pipelineRun, bucket string, n int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		select {
		case <-r.done:
			cancel(fmt.Errorf("the job ended first (after %v): %v", r.took.Round(time.Millisecond), r.err))
		case <-ctx.Done():
		}
	}()
	ctx, stop := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %v", timeout))
	defer stop()
	if err := collect.AwaitContext(ctx, bucket, collect.AtLeast(n)); err != nil {
		t.Fatal(err)
	}
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

// readCheck compares what a read emitted with what was published: every
// id must be in got (lost otherwise); extra copies are duplicates.
func readCheck(t *testing.T, what string, sub pubsubio.Subscription, ids []string, got map[string]int) (dups int) {
	t.Helper()
	var lost []string
	for _, id := range ids {
		switch c := got[sub.ID+"/"+id]; {
		case c == 0:
			lost = append(lost, id)
		case c > 1:
			dups += c - 1
		}
	}
	if len(lost) > 0 {
		t.Errorf("%s: %d of %d messages lost, e.g. %v", what, len(lost), len(ids), lost[:min(5, len(lost))])
	}
	return dups
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
	e, srv := emulator.Fake(t)
	proxy := startProxy(t, e.Endpoint)
	const n, outstanding = 1000, 50
	topic := e.CreateTopic(t, "fault-streams")
	sub := parseSubs(t, e.CreateSubscription(t, topic, "fault-streams", 10*time.Second))[0]
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
	dups := readCheck(t, "read with broken streams", sub, ids, tally(t, bucket))
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
		if c.Namespace() == "pubsubio" && c.Result() != 0 {
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
	e, srv := emulator.Fake(t)
	proxy := startProxy(t, e.Endpoint)
	const n, outstanding = 600, 50
	topic := e.CreateTopic(t, "fault-commit")
	sub := parseSubs(t, e.CreateSubscription(t, topic, "fault-commit", 10*time.Second))[0]
	ids := e.Publish(t, topic, n, 256, nil)

	name := t.Name()
	probe := probeFor(name)
	t.Cleanup(func() { commitProbes.Delete(name) })
	p, first := readInto(t, brokenStreamsConfig(sub, proxy, outstanding), func(s beam.Scope, msgs beam.PCollection) {
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

// faultAtFn passes messages through and, at the At-th message it sees in
// this process, injects Fault's fault into the proxy named Name: mid-bundle,
// with the messages before it already handed to the writer.
type faultAtFn struct {
	Name string
	At   int64
}

// faultAt is what a faultAtFn does when it fires.
type faultAt struct {
	seen  atomic.Int64
	fired chan struct{}
	fault func()
}

var faults sync.Map // name -> *faultAt

func (f *faultAtFn) ProcessElement(m pubsubio.Message, emit func(pubsubio.Message)) {
	if v, ok := faults.Load(f.Name); ok {
		fa := v.(*faultAt)
		if fa.seen.Add(1) == f.At {
			fa.fault()
			close(fa.fired)
		}
	}
	emit(m)
}

// deliveries pulls sub until every one of want distinct payloads arrived or
// timeout passed, acking everything, and returns the copies of each payload
// that arrived by then. Copies still on their way when the last distinct
// payload arrives are not waited for: the duplicate count is what was seen.
func deliveries(t *testing.T, client *pubsub.Client, sub string, want int, timeout time.Duration) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var mu sync.Mutex
	got := map[string]int{}
	err := client.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		got[string(m.Data)]++
		if len(got) >= want {
			cancel()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) < want {
		t.Fatalf("%s: %d of %d distinct messages arrived within %v (Receive: %v)", sub, len(got), want, timeout, err)
	}
	return got
}

// (b) Publishes failing UNAVAILABLE during a bundle: a Write of 1,000
// messages through the proxy, which, at the 300th message of the bundle,
// once Pub/Sub confirmed a first publish, refuses every new connection and
// closes the open ones. The client retries
// until the publisher's 3 s timeout; the bundle fails, and the job with it.
// Once the proxy accepts again, a rerun of the same pipeline delivers every
// message.
func TestFaultPublishUnavailableMidBundle(t *testing.T) {
	e := emulator.Require(t)
	client := e.Client(t)
	proxy := startProxy(t, e.Endpoint)
	topic := e.CreateTopic(t, "fault-publish")
	outSub := e.CreateSubscription(t, topic, "fault-publish", 0)
	const n, size, at = 1000, 64, 300
	name := t.Name()
	fa := &faultAt{fired: make(chan struct{}), fault: func() {
		// Once Pub/Sub answered a first publish (message IDs are more than
		// the 40 bytes of connection set-up), so the outage lands on a
		// writer that is connected and has published part of its bundle.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := proxy.Await(ctx, func(s faultproxy.Stats) bool { return s.BytesToClient >= 1024 }); err != nil {
			t.Errorf("no publish went through before the fault: %v", err)
		}
		proxy.Refuse()
		proxy.DropAll()
	}}
	faults.Store(name, fa)
	t.Cleanup(func() { faults.Delete(name) })
	cfg := pubsubio.WriteConfig{
		Topic: mustParseTopic(t, topic),
		// Short, so that the outage surfaces in seconds: the client retries
		// UNAVAILABLE until this timeout, 60 s by default.
		Publisher:  pubsubio.PublisherOptions{Timeout: 3 * time.Second, RetryInitialBackoff: 50 * time.Millisecond, RetryMaxBackoff: 500 * time.Millisecond},
		Connection: pubsubio.Connection{EmulatorEndpoint: proxy.Addr()},
	}
	through := func(s beam.Scope, col beam.PCollection) beam.PCollection {
		return beam.ParDo(s, &faultAtFn{Name: name, At: at}, col)
	}

	p, _ := writePipeline(t, cfg, sinkMessages(n, size, nil), through)
	run := runInBackground(p, 2*time.Minute)
	run.wait(t, 2*time.Minute)
	select {
	case <-fa.fired:
	default:
		t.Fatalf("the fault never fired: the writer saw %d of %d messages (job: %v)", fa.seen.Load(), n, run.err)
	}
	if run.err == nil {
		t.Fatalf("the job succeeded in %v although every connection was refused from its %d-th message on (proxy %+v)", run.took, at, proxy.Stats())
	}
	if s := run.err.Error(); !strings.Contains(s, topic) || !(strings.Contains(s, "Unavailable") || strings.Contains(s, "UNAVAILABLE") || strings.Contains(s, "DeadlineExceeded") || strings.Contains(s, "DEADLINE_EXCEEDED")) {
		t.Errorf("the failure names neither the topic nor the status:\n%v", run.err)
	}
	t.Logf("failed job: ended after %v; proxy %+v; error: %s", run.took.Round(time.Millisecond), proxy.Stats(), excerpt(run.err, "pubsubio.Write"))

	proxy.Accept()
	// The rerun's messages count on from n: the fault does not fire again.
	p, dead := writePipeline(t, cfg, sinkMessages(n, size, nil), through)
	rerun := runInBackground(p, 2*time.Minute)
	rerun.wait(t, 2*time.Minute)
	if rerun.err != nil {
		t.Fatalf("the rerun failed: %v", rerun.err)
	}
	if got := collect.Len(dead); got != 0 {
		t.Errorf("%d dead letters", got)
	}
	got := deliveries(t, client, outSub, n, 2*time.Minute)
	dups := 0
	for i := range n {
		switch c := got[string(emulator.Payload(i, size))]; {
		case c == 0:
			t.Errorf("message %d never arrived", i)
		case c > 1:
			dups += c - 1
		}
	}
	t.Logf("rerun: ok in %v, records_sent %d; on the topic: %d distinct, %d duplicates (published by the failed job before the outage)",
		rerun.took.Round(time.Millisecond), counter(rerun.res, "records_sent"), len(got), dups)
}

// excerpt is err's text from the first occurrence of from (or its start),
// up to 400 characters, for logs: a runner's error is mostly its plan.
func excerpt(err error, from string) string {
	s := err.Error()
	if i := strings.Index(s, from); i >= 0 {
		s = s[i:]
	}
	return s[:min(400, len(s))]
}

// (c) The emulator killed and restarted mid-read. The Java emulator keeps
// everything in memory (it has no persistence flag: --help lists host,
// port, iam_host, iam_port and projects), so the restarted one has neither
// the topic, the subscription nor the backlog. What is true then: the read
// fails the job with an error naming the subscription and saying it does
// not exist (it does not end as if idle, which would hide the outage), and
// once the resources are re-created and published to, a rerun reads
// everything.
func TestFaultEmulatorRestartedMidRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	own, err := emulator.Start(ctx)
	if err != nil {
		if errors.Is(err, emulator.ErrUnavailable) {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := own.Stop(); err != nil {
			t.Errorf("stopping the test's own emulator: %v", err)
		}
	})
	const n, outstanding = 1000, 50
	topic := own.CreateTopic(t, "fault-restart")
	subName := own.CreateSubscription(t, topic, "fault-restart", 10*time.Second)
	sub := parseSubs(t, subName)[0]
	own.Publish(t, topic, n, 256, nil)
	cfg := pubsubio.ReadConfig{
		Subscriptions:          []pubsubio.Subscription{sub},
		MaxOutstandingMessages: outstanding,
		MaxRecordsPerBundle:    outstanding / 2,
		IdleTimeout:            20 * time.Second,
		Connection:             pubsubio.Connection{EmulatorEndpoint: own.Endpoint},
	}

	p, first := readInto(t, cfg, nil)
	run := runInBackground(p, 2*time.Minute)
	awaitProgress(t, run, first, 300, time.Minute)
	start := time.Now()
	if err := own.Restart(ctx); err != nil {
		t.Fatalf("restarting the emulator: %v", err)
	}
	restarted := time.Since(start)
	client := own.Client(t)
	if _, err := client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topic}); status.Code(err) != codes.NotFound {
		t.Errorf("the restarted emulator answers GetTopic(%s) with %v; want NotFound (nothing persists)", topic, err)
	}
	run.wait(t, 2*time.Minute)
	t.Logf("restart took %v; the job emitted %d of %d and ended %v after the restart began",
		restarted.Round(time.Millisecond), collect.Len(first), n, (run.took - start.Sub(run.start)).Round(time.Millisecond))
	if run.err == nil {
		t.Fatalf("the read succeeded although its subscription vanished with the emulator; it emitted %d of %d", collect.Len(first), n)
	}
	wantInError(t, run.err, sub.String(), "does not exist")
	t.Logf("failed job's error: %s", excerpt(run.err, "pubsubio: "))

	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("re-creating %s: %v", topic, err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subName, Topic: topic, AckDeadlineSeconds: 10}); err != nil {
		t.Fatalf("re-creating %s: %v", subName, err)
	}
	ids := own.Publish(t, topic, n, 256, nil)
	p, second := readInto(t, cfg, nil)
	rerun := runInBackground(p, 2*time.Minute)
	rerun.wait(t, 2*time.Minute)
	if rerun.err != nil {
		t.Fatalf("the rerun on the re-created subscription failed: %v", rerun.err)
	}
	dups := readCheck(t, "rerun after the restart", sub, ids, tally(t, second))
	t.Logf("rerun: %d messages in %v, %d duplicates", n, rerun.took.Round(time.Millisecond), dups)
}

// (d) Admin failures in the prepare step, injected by pstest reactors on
// the one subscription under test: the job fails at the prepare step with
// an error naming the subscription and saying what to do, and nothing is
// delivered from it. UNAVAILABLE is retried by the client (GetSubscription,
// CreateSubscription and Seek retry it for up to 60 s): a transient one is
// ridden out and the read goes on. A lasting one is not tested: it takes
// the client's 60 s, and in the one run tried the in-process Prism
// panicked the test binary right after ("ctrl.Recv failed ...
// DeadlineExceeded", prism/internal/worker/worker.go:316; not investigated).
func TestFaultPrepareAdminFailures(t *testing.T) {
	const subID = "prep-fault"
	sub := pubsubio.SubscriptionOf(emulator.Project, subID)
	type setup int
	const (
		existing   setup = iota // the subscription exists, no Setup
		missing                 // it does not; Setup carries create options
		seekLatest              // pstest answers a snapshot seek Unimplemented before any reactor runs
	)
	cases := []struct {
		name   string
		method string
		code   codes.Code
		times  int // how many calls fail; 0 means every one
		setup  setup
		wants  []string // in the error; none when the job must succeed
	}{
		{"describe permission denied", "GetSubscription", codes.PermissionDenied, 0, existing, []string{"pubsub.subscriptions.get", "roles/pubsub.viewer"}},
		{"describe not found", "GetSubscription", codes.NotFound, 0, existing, []string{"does not exist", "Create.Topic"}},
		{"describe unavailable twice", "GetSubscription", codes.Unavailable, 2, existing, nil},
		{"create permission denied", "CreateSubscription", codes.PermissionDenied, 0, missing, []string{"pubsub.subscriptions.create", "roles/pubsub.editor"}},
		{"create topic not found", "CreateSubscription", codes.NotFound, 0, missing, []string{"does not exist", "never creates topics"}},
		{"create unavailable twice", "CreateSubscription", codes.Unavailable, 2, missing, nil},
		{"seek permission denied", "Seek", codes.PermissionDenied, 0, seekLatest, []string{"pubsub.subscriptions.consume", "roles/pubsub.subscriber"}},
		{"seek unavailable twice", "Seek", codes.Unavailable, 2, seekLatest, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var failures atomic.Int64
			e, srv := emulator.Fake(t, pstest.ServerReactorOption{FuncName: tc.method, Reactor: reactorFunc(func(req any) (bool, any, error) {
				if !namesSubscription(req, sub.String()) || (tc.times > 0 && failures.Load() >= int64(tc.times)) {
					return false, nil, nil
				}
				failures.Add(1)
				return true, nil, status.Errorf(tc.code, "injected %v on %s", tc.code, tc.method)
			})})
			client := e.Client(t)
			topic := mustParseTopic(t, e.CreateTopic(t, "prep-fault"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tc.setup != missing {
				if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub.String(), Topic: topic.String(), AckDeadlineSeconds: 10}); err != nil {
					t.Fatalf("creating %s: %v", sub, err)
				}
			}
			const n = 20
			ids := e.Publish(t, topic.String(), n, 16, nil)
			cfg := pubsubio.ReadConfig{
				Subscriptions: []pubsubio.Subscription{sub},
				MaxMessages:   n,
				IdleTimeout:   30 * time.Second,
				Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
			}
			switch tc.setup {
			case missing:
				cfg.Setup = []pubsubio.SubscriptionSetup{{Subscription: sub, Create: pubsubio.SubscriptionCreateOptions{Topic: topic}}}
				// What was published before the subscription existed is not
				// its to deliver: a successful job only creates it, then idles.
				cfg.MaxMessages, cfg.IdleTimeout = 0, 2*time.Second
			case seekLatest:
				cfg.Setup = []pubsubio.SubscriptionSetup{{Subscription: sub, Start: pubsubio.StartLatest()}}
				// The seek drops the backlog: a successful job only seeks.
				cfg.MaxMessages, cfg.IdleTimeout = 0, 2*time.Second
			}
			p, bucket := readInto(t, cfg, nil)
			start := time.Now()
			if tc.wants == nil {
				runCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := beamx.RunWithMetrics(runCtx, p)
				if err != nil {
					t.Fatalf("the job failed although %s failed only %d times (UNAVAILABLE is retried): %v", tc.method, tc.times, err)
				}
				if got := failures.Load(); got != int64(tc.times) {
					t.Errorf("%d injected failures, want %d", got, tc.times)
				}
				switch tc.setup {
				case existing:
					wantAll(t, tc.name, bucket, sub, ids)
				case missing:
					if got := counter(res, "subscriptions_created"); got != 1 {
						t.Errorf("subscriptions_created %d, want 1", got)
					}
				case seekLatest:
					if got := counter(res, "seeks_performed"); got != 1 {
						t.Errorf("seeks_performed %d, want 1", got)
					}
				}
				t.Logf("%s: %d injected UNAVAILABLE, job ok in %v", tc.method, failures.Load(), time.Since(start).Round(time.Millisecond))
				return
			}
			err := runFails(t, p)
			wantInError(t, err, append([]string{sub.String()}, tc.wants...)...)
			if collect.Len(bucket) != 0 {
				t.Errorf("the failed job emitted %d messages", collect.Len(bucket))
			}
			for _, id := range ids {
				if m := srv.Message(id); m.Deliveries != 0 {
					t.Errorf("message %s delivered %d times by a job whose prepare step failed", id, m.Deliveries)
				}
			}
			t.Logf("%s %v x%d: job failed in %v: %s", tc.method, tc.code, failures.Load(), time.Since(start).Round(time.Millisecond), excerpt(err, "pubsubio: "))
		})
	}
}

// namesSubscription says whether an admin request is about sub.
func namesSubscription(req any, sub string) bool {
	switch r := req.(type) {
	case *pubsubpb.GetSubscriptionRequest:
		return r.GetSubscription() == sub
	case *pubsubpb.Subscription:
		return r.GetName() == sub
	case *pubsubpb.SeekRequest:
		return r.GetSubscription() == sub
	}
	return false
}
