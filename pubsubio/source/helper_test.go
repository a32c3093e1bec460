package source

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Test helpers shared by the package's tests: a hand-moved clock, fake
// handles and pullers, a split-reader harness and an in-process pstest
// server. The prepare step's in-memory admin is in
// internal/prepare/helper_test.go.

// waitLimit bounds every wait for another goroutine; a wait that hits it
// fails the test saying what it waited for.
const waitLimit = 10 * time.Second

// fakeClock is a hand-moved clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeHandle records what was done to one delivery.
type fakeHandle struct {
	acks, nacks atomic.Int32
}

func (h *fakeHandle) Ack() { h.acks.Add(1) }

func (h *fakeHandle) Nack() { h.nacks.Add(1) }

func (h *fakeHandle) check(t *testing.T, what string, acks, nacks int32) {
	t.Helper()
	if a, n := h.acks.Load(), h.nacks.Load(); a != acks || n != nacks {
		t.Errorf("%s: %d acks and %d nacks, want %d and %d", what, a, n, acks, nacks)
	}
}

// fakePuller is a subscription whose receive delivers nothing by itself (the
// test calls deliver) and blocks until its context is done. It hands the
// context of every receive call to the test.
type fakePuller struct {
	receives chan context.Context

	mu          sync.Mutex
	acked       [][]string
	nacked      [][]string
	closed      int
	ackErr      error
	describeErr error // what describe returns
	describes   int   // describe calls
	inventory   []*trackedHandle
	stream      streamHealth
}

// trackedHandle is a delivery in a fakePuller's inventory.
type trackedHandle struct {
	handle
	settled atomic.Bool
}

func (t *trackedHandle) Ack() { t.settled.Store(true); t.handle.Ack() }

func (t *trackedHandle) Nack() { t.settled.Store(true); t.handle.Nack() }

// deliverTo delivers m to r as the client would, acked or nacked through h
// under id (a stand-in ack ID when id is empty), and puts the delivery in
// the fake puller's inventory: like the client under NackImmediately, the
// fake nacks what is still unsettled when its receive ends.
func deliverTo(r *splitReader, run *receiveRun, m *pubsub.Message, h handle, id string) {
	tracked := &trackedHandle{handle: h}
	r.mu.Lock()
	inv, _ := r.conn.(interface{ hold(*trackedHandle) })
	r.mu.Unlock()
	if inv != nil {
		inv.hold(tracked)
	}
	d := fromClient(m, r.split.Subscription, &r.cfg)
	d.handle = tracked
	if id != "" {
		d.ackID = ackID(id)
	}
	r.deliver(run, d)
}

func (f *fakePuller) hold(h *trackedHandle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inventory = append(f.inventory, h)
}

// nackInventory is the client's NackImmediately shutdown.
func (f *fakePuller) nackInventory() {
	f.mu.Lock()
	inv := f.inventory
	f.inventory = nil
	f.mu.Unlock()
	for _, h := range inv {
		if !h.settled.Load() {
			h.Nack()
		}
	}
}

func newFakePuller() *fakePuller { return &fakePuller{receives: make(chan context.Context, 100)} }

func (f *fakePuller) receive(ctx context.Context, _ func(*pubsub.Message) bool) error {
	f.receives <- ctx
	<-ctx.Done()
	f.nackInventory()
	return nil
}

func (f *fakePuller) describe(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes++
	return f.describeErr
}

func (f *fakePuller) acknowledge(_ context.Context, ackIDs []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = append(f.acked, append([]string(nil), ackIDs...))
	return f.ackErr
}

func (f *fakePuller) nack(_ context.Context, ackIDs []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nacked = append(f.nacked, append([]string(nil), ackIDs...))
	return nil
}

// nackedByRPC returns every ack ID nacked with the RPC, in order.
func (f *fakePuller) nackedByRPC() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, n := range f.nacked {
		ids = append(ids, n...)
	}
	return ids
}

func (f *fakePuller) health() *streamHealth { return &f.stream }

func (f *fakePuller) exactlyOnce() (enabled, known bool) { return false, true }

func (f *fakePuller) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

func (f *fakePuller) acknowledged() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.acked...)
}

func (f *fakePuller) closeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// nextReceive returns the context of the next receive call.
func (f *fakePuller) nextReceive(t *testing.T) context.Context {
	t.Helper()
	select {
	case ctx := <-f.receives:
		return ctx
	case <-time.After(waitLimit):
		t.Fatalf("no receive call within %v", waitLimit)
		return nil
	}
}

// noMoreReceives checks that no receive call is queued.
func (f *fakePuller) noMoreReceives(t *testing.T) {
	t.Helper()
	select {
	case <-f.receives:
		t.Error("an unexpected receive call was made")
	default:
	}
}

// withheldIDs returns the message IDs r withholds, in arrival order, and
// fails t if one of them kept its payload.
func withheldIDs(t *testing.T, r *splitReader) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, d := range r.ledger.withheld {
		if d.msg.Data != nil || d.msg.Attributes != nil {
			t.Errorf("withheld message %s kept its payload", d.msg.ID)
		}
		ids = append(ids, d.msg.ID)
	}
	return ids
}

// awaitRunEnded waits for a stopped receive to return: by then the fake
// has nacked its inventory, as the client's shutdown does.
func awaitRunEnded(t *testing.T, what string, run *receiveRun) {
	t.Helper()
	select {
	case <-run.done:
	case <-time.After(waitLimit):
		t.Fatalf("%s: receive did not return within %v", what, waitLimit)
	}
}

// awaitDone waits for a receive context to be cancelled.
func awaitDone(t *testing.T, what string, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(waitLimit):
		t.Fatalf("%s: receive context not cancelled within %v", what, waitLimit)
	}
}

// awaitCondition polls cond until it holds, for at most waitLimit: for
// state another goroutine reaches without signalling it.
func awaitCondition(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// readerHarness is one split reader over a fakePuller with a hand-moved clock.
type readerHarness struct {
	t      *testing.T
	r      *splitReader
	conn   *fakePuller
	clock  *fakeClock
	rs     *readState
	stats  *stats
	budget *budget
	dials  atomic.Int32
}

func newReaderHarness(t *testing.T, cfg Config) *readerHarness {
	t.Helper()
	rs := newReadState(cfg)
	h := &readerHarness{
		t:      t,
		conn:   newFakePuller(),
		clock:  newFakeClock(),
		rs:     rs,
		stats:  rs.stats,
		budget: rs.budget,
	}
	split := Split{Index: 0, Subscription: cfg.Subscriptions[0]}
	h.r = newSplitReader(split, cfg, rs, h.clock.now, func(context.Context) (puller, error) {
		h.dials.Add(1)
		return h.conn, nil
	})
	// Deliveries crossing the budget are withheld at once; the wait for
	// room has its own tests.
	h.r.budgetWait = 0
	t.Cleanup(func() { h.r.release(nackedRelease) })
	return h
}

// poll polls the reader and returns its running receive.
func (h *readerHarness) poll() *receiveRun {
	h.t.Helper()
	return pollRun(h.t, h.r)
}

// poll starts r's subscriber as a bundle does, and returns the failure it
// stopped with, if any.
func poll(r *splitReader) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastPolled = r.now()
	return r.startLocked(context.Background())
}

// drain takes up to max buffered deliveries for bundle seq, as
// beginBundle does.
func drain(r *splitReader, max int, seq int64) []*delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.drain(max, seq, r.now())
}

// ack acks ids through the held messages, as the next bundle does: each
// as the bundle that emitted it.
func ack(r *splitReader, ids []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range ids {
		if d := r.ledger.pending[ackID(id)]; d != nil {
			n += r.ledger.ack([]ackID{d.ackID}, d.seq, r.now())
		}
	}
	return n
}

// state is what a bundle ending now sees; it moves the split's own
// watermark as a bundle does.
func state(r *splitReader) splitState {
	return r.endBundle(nil, r.cfg.watermarkPolicy())
}

func pollRun(t *testing.T, r *splitReader) *receiveRun {
	t.Helper()
	if err := poll(r); err != nil {
		t.Fatalf("poll: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == nil {
		t.Fatal("poll left no subscriber running")
	}
	return r.running
}

func (h *readerHarness) checkCount(name string, c counter, want int64) {
	h.t.Helper()
	if got := h.stats.get(c); got != want {
		h.t.Errorf("%s = %d, want %d", name, got, want)
	}
}

func (h *readerHarness) checkUsage(messages int, bytes int64) {
	h.t.Helper()
	if m, b := h.budget.usage(); m != messages || b != bytes {
		h.t.Errorf("budget usage %d messages / %d bytes, want %d / %d", m, b, messages, bytes)
	}
}

func msg(id, data string) *pubsub.Message {
	return &pubsub.Message{ID: id, Data: []byte(data), PublishTime: time.Date(2024, 1, 1, 11, 0, 0, 0, time.UTC)}
}

// deliverN delivers messages m0..m(n-1) (ack IDs ack-m0...) and returns
// their handles.
func deliverN(r *splitReader, run *receiveRun, prefix string, n int) []*fakeHandle {
	hs := make([]*fakeHandle, n)
	for i := range hs {
		hs[i] = &fakeHandle{}
		id := fmt.Sprintf("%s%d", prefix, i)
		deliverTo(r, run, msg(id, "data-"+id), hs[i], "ack-"+id)
	}
	return hs
}

func ackIDsOf(ds []*delivery) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = string(d.ackID)
	}
	return ids
}

const testProject = "pubsubio-test"

// fakeServer is an in-process pstest server with a client bound to it.
type fakeServer struct {
	srv    *pstest.Server
	client *pubsub.Client
	conn   connection.Settings
}

func newFakeServer(t *testing.T, opts ...pstest.ServerReactorOption) *fakeServer {
	t.Helper()
	srv := pstest.NewServer(opts...)
	conn := connection.Settings{EmulatorEndpoint: srv.Addr}
	client, err := connection.NewClient(context.Background(), testProject, conn)
	if err != nil {
		t.Fatalf("client for pstest: %v", err)
	}
	t.Cleanup(func() {
		client.Close()
		srv.Close()
	})
	return &fakeServer{srv: srv, client: client, conn: conn}
}

// topicWithSubs creates a topic and n subscriptions on it.
func (f *fakeServer) topicWithSubs(t *testing.T, name string, n int) (string, []model.Subscription) {
	t.Helper()
	ctx := context.Background()
	topic := fmt.Sprintf("projects/%s/topics/%s", testProject, name)
	if _, err := f.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	var subs []model.Subscription
	for i := range n {
		sub := model.SubscriptionOf(testProject, fmt.Sprintf("%s-sub-%d", name, i))
		if _, err := f.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: sub.String(), Topic: topic, AckDeadlineSeconds: 10,
		}); err != nil {
			t.Fatalf("create subscription: %v", err)
		}
		subs = append(subs, sub)
	}
	return topic, subs
}

// publishLarge publishes n messages of size bytes, one per request (pstest
// takes requests of at most 4 MiB), and returns their IDs.
func (f *fakeServer) publishLarge(t *testing.T, topic string, n, size int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := f.client.Publisher(topic)
	pub.PublishSettings.CountThreshold = 1
	defer pub.Stop()
	ids := make([]string, n)
	for i := range ids {
		data := make([]byte, size)
		copy(data, fmt.Sprint(i))
		id, err := pub.Publish(ctx, &pubsub.Message{Data: data}).Get(ctx)
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

// acked counts the messages among ids that pstest saw acked.
func (f *fakeServer) acked(ids []string) int {
	n := 0
	for _, id := range ids {
		if m := f.srv.Message(id); m != nil && m.Acks > 0 {
			n++
		}
	}
	return n
}

// givenBack reports whether pstest saw the message id nacked: a
// ModifyAckDeadline of 0.
func (f *fakeServer) givenBack(id string) bool {
	m := f.srv.Message(id)
	if m == nil {
		return false
	}
	for _, ma := range m.Modacks {
		if ma.AckDeadline == 0 {
			return true
		}
	}
	return false
}

// receiveAll receives and acks messages from sub with the raw client until
// it has n distinct IDs or limit passed, and returns the IDs it got.
func (f *fakeServer) receiveAll(t *testing.T, sub model.Subscription, n int, limit time.Duration) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var mu sync.Mutex
	got := map[string]bool{}
	err := f.client.Subscriber(sub.String()).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if got[m.ID] = true; len(got) >= n {
			cancel()
		}
	})
	if err != nil && ctx.Err() == nil {
		t.Fatalf("receive from %s: %v", sub, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(got)
}

// publish publishes n messages and returns their IDs.
func (f *fakeServer) publish(t *testing.T, topic string, n int, attrs func(int) map[string]string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := f.client.Publisher(topic)
	defer pub.Stop()
	results := make([]*pubsub.PublishResult, n)
	for i := range n {
		m := &pubsub.Message{Data: fmt.Appendf(nil, "message-%d", i)}
		if attrs != nil {
			m.Attributes = attrs(i)
		}
		results[i] = pub.Publish(ctx, m)
	}
	ids := make([]string, n)
	for i, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

// runBounded runs p on Prism with metrics, failing the test if it does
// not end within timeout.
func runBounded(t *testing.T, p *beam.Pipeline, timeout time.Duration) (beam.PipelineResult, error) {
	t.Helper()
	type outcome struct {
		res beam.PipelineResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := ptest.RunWithMetrics(p)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(timeout):
		t.Fatalf("the job did not end within %v", timeout)
		return nil, nil
	}
}

// validConfig is the smallest valid configuration.
func validConfig() Config {
	return Config{Subscriptions: testSubs(1)}
}

// testConfig is validConfig with defaults applied, after edit.
func testConfig(t *testing.T, edit func(*Config)) Config {
	t.Helper()
	return testPlan(t, edit).Cfg
}

// testPlan is the read plan of testConfig's configuration: with the
// subscriptions it creates for its topics.
func testPlan(t *testing.T, edit func(*Config)) readPlan {
	t.Helper()
	cfg := validConfig()
	if edit != nil {
		edit(&cfg)
	}
	p, err := newReadPlan(cfg)
	if err != nil {
		t.Fatalf("test configuration is invalid: %v", err)
	}
	return p
}

func testSubs(n int) []model.Subscription {
	subs := make([]model.Subscription, n)
	for i := range subs {
		subs[i] = model.SubscriptionOf("pubsubio-test", fmt.Sprintf("sub-%d", i))
	}
	return subs
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// skipUnderShort skips a test that runs for many seconds on Prism: the
// -short tier is the edit loop's.
func skipUnderShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs for many seconds on Prism: skipped under -short")
	}
}
