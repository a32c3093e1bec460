package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/faultproxy"
	"github.com/pubsubio/beam-pubsubio/integration/sample"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
)

// The helpers more than one test file of the package uses. A helper only
// one file needs stays in that file.

func init() {
	register.Function1x1(subscriptionAndID)
	register.Function1x1(deadLetterKey)
}

// envLong selects the long reliability tests.
const envLong = "PUBSUB_IT_LONG" // "1" selects them

// envIsolated names the test that a child process of this test binary
// runs for isolated.
const envIsolated = "PUBSUB_IT_ISOLATED"

// testLogLine matches a line a test logged (t.Log) in go test -v output.
var testLogLine = regexp.MustCompile(`^\s+\w+\.go:\d+: `)

// isolated runs the calling test in a child process of this test binary,
// beside the other tests (t.Parallel), for a test that changes
// process-wide state: flags and the environment (a job submitted to
// Flink, the drop-in's flags), the tracer provider, the backlog sampler's
// counters. The child shares this process's emulator. In the parent,
// isolated returns true once the child ended, with the child's log lines
// relayed and its failure or skip the parent's, and the test returns; in
// the child it returns false and the test runs.
func isolated(t *testing.T) bool {
	t.Helper()
	if os.Getenv(envIsolated) == t.Name() {
		return false
	}
	t.Parallel()
	e := emulator.Require(t)
	args := []string{"-test.run=^" + t.Name() + "$", "-test.v", "-test.count=1"}
	if deadline, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(deadline).Round(time.Second).String())
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), envIsolated+"="+t.Name(), emulator.EnvEndpoint+"="+e.Endpoint)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if testLogLine.MatchString(line) {
			fmt.Fprintln(t.Output(), strings.TrimSpace(line)) // it has its own file:line
		}
	}
	switch {
	case err != nil:
		t.Fatalf("%s in a process of its own: %v; its output ends:\n%s", t.Name(), err, crash.Tail(string(out), 8000))
	case strings.Contains(string(out), "--- SKIP: "+t.Name()+" "):
		t.Skip("skipped in its process")
	case !strings.Contains(string(out), "--- PASS: "+t.Name()+" "):
		t.Fatalf("%s in a process of its own did not pass; its output ends:\n%s", t.Name(), crash.Tail(string(out), 8000))
	}
	return true
}

// longTests skips t unless PUBSUB_IT_LONG=1.
func longTests(t *testing.T) {
	t.Helper()
	if os.Getenv(envLong) != "1" {
		t.Skipf("long reliability test: runs for minutes; set %s=1 to run it (scripts/reliability does)", envLong)
	}
}

// soakDuration is the duration the environment variable env gives a soak,
// at least least, or def when it is unset.
func soakDuration(t *testing.T, env string, def, least time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < least {
		t.Fatalf("%s=%q: want a duration of at least %v, e.g. %v", env, v, least, def)
	}
	return d
}

// Reading.

// subscriptionAndID keys what a read emitted for the checks: subscription
// ID and message ID.
func subscriptionAndID(m pubsubio.Message) string { return m.Subscription.ID + "/" + m.ID }

// deadLetterKey keys a dead letter for the checks: message ID, stage and
// subscription.
func deadLetterKey(f dlq.FailedMessage) string {
	return fmt.Sprintf("%s/%s/%s", f.Message.ID, f.Stage, f.Subscription.ID)
}

// readInto builds a pipeline reading cfg into a fresh bucket, keyed by
// subscriptionAndID.
func readInto(t *testing.T, cfg pubsubio.ReadConfig, downstream func(beam.Scope, beam.PCollection)) (*beam.Pipeline, string) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, cfg)
	if downstream != nil {
		downstream(s, msgs)
	}
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, beam.ParDo(s, subscriptionAndID, msgs))
	return p, bucket
}

// tally counts what a bucket holds per key.
func tally(t *testing.T, bucket string) map[string]int {
	t.Helper()
	keys, err := collect.ItemsOf[string](bucket)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, k := range keys {
		n[k]++
	}
	return n
}

// readCheck compares what a read emitted from sub (got, keyed by
// subscriptionAndID) with what was published: every id must be in got
// (lost otherwise, which fails the test); extra copies are duplicates. It
// returns how many were lost and how many duplicates there were.
func readCheck(t *testing.T, what string, sub pubsubio.Subscription, ids []string, got map[string]int) (lost, dups int) {
	t.Helper()
	var missing []string
	for _, id := range ids {
		switch c := got[sub.ID+"/"+id]; {
		case c == 0:
			missing = append(missing, id)
		case c > 1:
			dups += c - 1
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d of %d messages lost, e.g. %v", what, len(missing), len(ids), missing[:min(5, len(missing))])
	}
	return len(missing), dups
}

// wantAll checks that every id was emitted from sub at least once.
func wantAll(t *testing.T, what, bucket string, sub pubsubio.Subscription, ids []string) {
	t.Helper()
	got := tally(t, bucket)
	var missing []string
	for _, id := range ids {
		if got[sub.ID+"/"+id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d of %d messages not emitted, e.g. %v", what, len(missing), len(ids), missing[:min(5, len(missing))])
	}
}

// runSetup runs a read of the subscriptions that setup names, with nothing
// published, so it ends once idle, and returns the job's metrics: what the
// prepare step did is all there is to see.
func runSetup(t *testing.T, conn pubsubio.Connection, idle time.Duration, setup ...pubsubio.SubscriptionSetup) beam.PipelineResult {
	t.Helper()
	cfg := pubsubio.ReadConfig{Setup: setup, IdleTimeout: idle, Connection: conn}
	for _, s := range setup {
		cfg.Subscriptions = append(cfg.Subscriptions, s.Subscription)
	}
	p, _ := readInto(t, cfg, nil)
	res, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	return res
}

// Writing.

// sinkMessages returns n messages whose payloads are emulator.Payload(i, size).
func sinkMessages(n, size int, decorate func(i int, m *pubsubio.Message)) []pubsubio.Message {
	ms := make([]pubsubio.Message, n)
	for i := range ms {
		ms[i] = pubsubio.Message{Data: emulator.Payload(i, size)}
		if decorate != nil {
			decorate(i, &ms[i])
		}
	}
	return ms
}

// writePipeline writes msgs with cfg and collects the dead letters into a
// fresh bucket.
func writePipeline(t *testing.T, cfg pubsubio.WriteConfig, msgs []pubsubio.Message, middle func(beam.Scope, beam.PCollection) beam.PCollection) (*beam.Pipeline, string) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	col := beam.CreateList(s, msgs)
	if middle != nil {
		col = middle(s, col)
	}
	dead := pubsubio.Write(s, cfg, col)
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, dead)
	return p, bucket
}

// Running jobs.

// pipelineRun is a job running in the background.
type pipelineRun struct {
	done   chan struct{}
	cancel context.CancelFunc // ends a streaming job
	res    beam.PipelineResult
	err    error
	start  time.Time
	took   time.Duration
}

// runInBackground runs p with metrics, bounded by timeout.
func runInBackground(p *beam.Pipeline, timeout time.Duration) *pipelineRun {
	ctx, cancel := runContext(timeout)
	r := &pipelineRun{done: make(chan struct{}), cancel: cancel, start: time.Now()}
	go func() {
		defer close(r.done)
		defer cancel()
		r.res, r.err = beamx.RunWithMetrics(ctx, p)
		r.took = time.Since(r.start)
	}()
	return r
}

// runContext is a context for beamx.Run on the in-process Prism that is
// cancelled after limit. Not a deadline: the LOOPBACK worker's control
// stream inherits the context, and Prism 2.77 panics, ending the whole
// test binary, when that stream fails with DeadlineExceeded
// (worker.go:316); a cancelled one fails only the job.
// When the limit passes, it prints to stderr first what a job that did not
// end was doing: the goroutines in pubsubio's code, in the state channels
// between the SDK and Prism and in gRPC's transports, and this process's
// TCP connections with bytes queued.
func runContext(limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(limit, func() {
		fmt.Fprintf(os.Stderr, "a job ran out its %v; the goroutines in pubsubio's code, in state channels and in gRPC's transports:\n%s\nthis process's TCP connections with bytes queued:\n%s\n",
			limit, ourGoroutines(), queuedSockets())
		cancel()
	})
	return ctx, func() { stop.Stop(); cancel() }
}

// ourGoroutines is the stacks of the goroutines that run pubsubio's code
// or serve state requests (a deduplicating bundle once waited for ever
// for Prism's answer to one), and of gRPC's transport writers and readers
// that are not idle, at most 256 KiB of them.
func ourGoroutines() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var b strings.Builder
	for _, g := range strings.Split(string(buf), "\n\n") {
		ours := strings.Contains(g, "beam-pubsubio/pubsubio") || strings.Contains(g, "prism/internal/worker.(*W).State") ||
			strings.Contains(g, "harness.(*StateChannel)") || busyTransport(g)
		if ours && b.Len() < 256<<10 {
			b.WriteString(g + "\n\n")
		}
	}
	return b.String()
}

// busyTransport reports whether g is a gRPC transport goroutine worth
// seeing in a hang: a writer waiting for flow-control quota or not idle, a
// reader throttled by its own unsent responses, or a server's reader (in
// CI run 20 a hung state request sat unread in the receive queue of
// Prism's end of its connection).
func busyTransport(g string) bool {
	return strings.Contains(g, "(*writeQuota).get") || strings.Contains(g, "(*controlBuffer).throttle") ||
		strings.Contains(g, "(*http2Server).HandleStreams") ||
		(strings.Contains(g, "(*loopyWriter).run") && !strings.Contains(g, "(*controlBuffer).get"))
}

// queuedSockets is this process's TCP connections whose receive or send
// queue holds bytes, as ss prints them: where bytes stopped between a
// sender and a reader.
func queuedSockets() string {
	out, err := exec.Command("ss", "-tnpH").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("ss: %v: %s", err, out)
	}
	var b strings.Builder
	pid := fmt.Sprintf("pid=%d,", os.Getpid())
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.Contains(line, pid) && (f[1] != "0" || f[2] != "0") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// findJob returns the running job whose pipeline mentions marker (the ID
// of a topic or subscription of its own), with a connection to the job
// server; nil and "" until there is exactly one such job.
func findJob(marker string) (*sample.Jobs, string) {
	jobs, err := sample.ConnectJobs()
	if err != nil {
		return nil, "" // the runner has not started its server yet
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids, err := jobs.Running(ctx, marker)
	if err != nil || len(ids) != 1 {
		_ = jobs.Close()
		return nil, ""
	}
	return jobs, ids[0]
}

// awaitCounter waits until the pubsubio counter name of r's job (the one
// that mentions marker, findJob) reaches n, as the job server sums it from
// the job's finished bundles while it runs, and fails the test with the
// last value seen if timeout passes or the job ends first.
func awaitCounter(t *testing.T, r *pipelineRun, marker, name string, n int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var jobs *sample.Jobs
	var job string
	defer func() {
		if jobs != nil {
			_ = jobs.Close()
		}
	}()
	var got int64
	for {
		if job == "" {
			jobs, job = findJob(marker)
		}
		if job != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			m, err := jobs.Metrics(ctx, job, "pubsubio")
			cancel()
			if err != nil {
				t.Logf("metrics of job %s: %v", job, err)
			}
			if got = m[name]; got >= n {
				return
			}
		}
		select {
		case <-r.done:
			t.Fatalf("the job ended (after %v: %v) with %s at %d, before it reached %d", r.took, r.err, name, got, n)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s of job %q is %d after %v, want %d", name, job, got, timeout, n)
		}
	}
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

// runFails runs a pipeline that must fail, bounded so that a job spinning
// instead of failing is reported as such.
func runFails(t *testing.T, p *beam.Pipeline) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := beamx.Run(ctx, p)
	if err == nil {
		t.Fatal("the pipeline succeeded; want it to fail")
	}
	if ctx.Err() != nil {
		t.Fatalf("the job ran until the test's deadline instead of failing: %v", err)
	}
	return err
}

// wantInError checks that err's text contains every one of wants.
func wantInError(t *testing.T, err error, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

// excerpt is err's text for a log line, a runner's error being mostly its
// plan: from the first occurrence of from (or from the start, when from is
// empty or absent), up to 400 characters; "<nil>" when err is nil.
func excerpt(err error, from string) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if i := strings.Index(s, from); i >= 0 {
		s = s[i:]
	}
	return s[:min(400, len(s))]
}

// Metrics.

// counter returns a pubsubio counter's committed (else attempted) value,
// summed over steps.
func counter(res beam.PipelineResult, name string) int64 {
	var total int64
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == pubsubio.MetricsNamespace && c.Name() == name {
			total += c.Result()
		}
	}
	return total
}

// gauge returns the last value of a pubsubio gauge, summed over steps.
func gauge(res beam.PipelineResult, name string) int64 {
	var total int64
	for _, g := range res.Metrics().AllMetrics().Gauges() {
		if g.Namespace() == pubsubio.MetricsNamespace && g.Name() == name {
			total += g.Result().Value
		}
	}
	return total
}

// Pub/Sub, with the client.

// receive pulls sub until want distinct payloads arrived or timeout
// passed, acking everything, and returns, per payload, the last message
// carrying it and how many copies of it arrived. Copies still on their way
// when the last distinct payload arrives are not waited for: a duplicate
// count is what was seen. A shortfall fails the test naming what arrived.
func receive(t *testing.T, client *pubsub.Client, sub pubsubio.Subscription, want int, timeout time.Duration) (byPayload map[string]*pubsub.Message, copies map[string]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var mu sync.Mutex
	byPayload, copies = map[string]*pubsub.Message{}, map[string]int{}
	deliveries := 0
	err := client.Subscriber(sub.String()).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		deliveries++
		byPayload[string(m.Data)] = m
		copies[string(m.Data)]++
		if len(byPayload) >= want {
			cancel()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if len(byPayload) < want {
		t.Fatalf("%s: %d of %d distinct messages arrived within %v (%d deliveries, Receive: %v); e.g. %v",
			sub, len(byPayload), want, timeout, deliveries, err, payloadSample(byPayload, 5))
	}
	return byPayload, copies
}

// receiveAll is receive's messages by payload.
func receiveAll(t *testing.T, client *pubsub.Client, sub pubsubio.Subscription, want int, timeout time.Duration) map[string]*pubsub.Message {
	t.Helper()
	got, _ := receive(t, client, sub, want, timeout)
	return got
}

// payloadSample returns the first n payloads of got, sorted, without their
// padding.
func payloadSample(got map[string]*pubsub.Message, n int) []string {
	var keys []string
	for k := range got {
		keys = append(keys, strings.TrimRight(k, "."))
	}
	sort.Strings(keys)
	return keys[:min(n, len(keys))]
}

// missingTopic names a topic that does not exist yet and deletes it, if
// the test made it exist, when the test ends.
func missingTopic(t *testing.T, e *emulator.Emulator, prefix string) pubsubio.Topic {
	t.Helper()
	topic := pubsubio.TopicOf(e.Project, fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()))
	client := e.Client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := client.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: topic.String()})
		if err != nil && status.Code(err) != codes.NotFound {
			t.Logf("deleting %s: %v", topic, err)
		}
	})
	return topic
}

// describe reads sub back from the emulator.
func describe(t *testing.T, client *pubsub.Client, sub pubsubio.Subscription) *pubsubpb.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: sub.String()})
	if err != nil {
		t.Fatalf("describing %s: %v", sub, err)
	}
	return got
}

// wantNeverExpires checks that sub has an expiration policy without a TTL,
// Pub/Sub's "never expires".
func wantNeverExpires(t *testing.T, client *pubsub.Client, sub pubsubio.Subscription) {
	t.Helper()
	if got := describe(t, client, sub); got.GetExpirationPolicy() == nil || got.GetExpirationPolicy().GetTtl() != nil {
		t.Errorf("%s: expiration policy %v, want a policy without a TTL (never expires)", sub, got.GetExpirationPolicy())
	}
}

// Faults.
//
// Fault tests (fault_*_test.go): the connector reaches the emulator through
// a loopback TCP proxy (integration/faultproxy) that breaks, refuses or
// stalls its connections on command, while the test's own admin, publish
// and verification clients talk to the emulator directly. Faults are
// triggered on progress (after so many messages were emitted, at the n-th
// element of a bundle), never on a timer alone, so each run breaks the same
// phase of the job. Admin failures in the prepare step are injected on
// pstest with reactors instead (fault_prepare_test.go).

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

// reactorFunc adapts a function to pstest.Reactor.
type reactorFunc func(req any) (bool, any, error)

func (r reactorFunc) React(req any) (bool, any, error) { return r(req) }
