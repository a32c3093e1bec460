package sink

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Writer tests against pstest, the client library's in-process Pub/Sub,
// through the production backend (a real client, real publishers, real
// gRPC): the client's own cascade, retry and batching behaviour, with
// faults injected by reactors.

// reactor adapts a function to pstest.Reactor.
type reactor func(req any) (handled bool, ret any, err error)

func (r reactor) React(req any) (bool, any, error) { return r(req) }

// publishFails fails Publish requests for which fail returns a non-nil
// error and counts every Publish request.
func publishFails(calls *atomic.Int64, fail func(req *pubsubpb.PublishRequest, call int64) error) pstest.ServerReactorOption {
	return pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactor(func(req any) (bool, any, error) {
		n := calls.Add(1)
		if err := fail(req.(*pubsubpb.PublishRequest), n); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})}
}

// countCalls counts calls of an RPC without changing it.
func countCalls(name string, calls *atomic.Int64) pstest.ServerReactorOption {
	return pstest.ServerReactorOption{FuncName: name, Reactor: reactor(func(any) (bool, any, error) {
		calls.Add(1)
		return false, nil, nil
	})}
}

// holdPublishes makes every Publish request wait until release is called
// (at the latest when the test ends), so that the test can hand the
// client a key's later messages before the first verdict returns and a
// cascade is certain. It holds pstest's lock: no other RPC runs meanwhile.
func holdPublishes(t *testing.T) (opt pstest.ServerReactorOption, release func()) {
	gate := make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	return pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactor(func(any) (bool, any, error) {
		<-gate
		return false, nil, nil
	})}, release
}

type fakeServer struct {
	srv   *pstest.Server
	admin *pubsub.Client
}

func newFakeServer(t *testing.T, opts ...pstest.ServerReactorOption) *fakeServer {
	t.Helper()
	srv := pstest.NewServer(opts...)
	admin, err := connection.NewClient(context.Background(), validTopic.Project, connection.Settings{EmulatorEndpoint: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Close()
		srv.Close()
	})
	return &fakeServer{srv: srv, admin: admin}
}

func (f *fakeServer) createTopic(t *testing.T, topic model.Topic) {
	t.Helper()
	if _, err := f.admin.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: topic.String()}); err != nil {
		t.Fatal(err)
	}
}

// payloads returns the payloads pstest holds for topic, in publish order,
// optionally only those with ordering key key.
func (f *fakeServer) payloads(topic model.Topic, key ...string) []string {
	var out []string
	for _, m := range f.srv.Messages() {
		if m.Topic == topic.String() && (len(key) == 0 || m.OrderingKey == key[0]) {
			out = append(out, string(m.Data))
		}
	}
	return out
}

// realHarness is a writer on the production backend against f.
func (f *fakeServer) harness(t *testing.T, cfg Config) *harness {
	t.Helper()
	cfg.Connection = connection.Settings{EmulatorEndpoint: f.srv.Addr}
	h := buildHarness(t, cfg, func(cfg Config) backend {
		be, err := newClientBackend(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return be
	})
	t.Cleanup(func() {
		if err := h.w.shutdown(context.Background(), "teardown"); err != nil {
			t.Logf("closing the writer: %v", err)
		}
	})
	return h
}

// NOT_FOUND: the messages are parked, the topic is created once with every
// create option, and everything is republished.
func TestPstestNotFoundCreatesTopicWithOptionsAndRepublishes(t *testing.T) {
	var creates atomic.Int64
	f := newFakeServer(t, countCalls("CreateTopic", &creates))
	opts := TopicCreateOptions{
		MessageRetention:          48 * time.Hour,
		KMSKeyName:                "projects/pubsubio-test/locations/europe-west1/keyRings/r/cryptoKeys/k",
		AllowedPersistenceRegions: []string{"europe-west1", "europe-west4"},
		EnforceInTransit:          true,
	}
	h := f.harness(t, Config{TopicCreate: opts, Publisher: PublisherOptions{CountThreshold: 5}})
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint(i))
		h.mustProcess(msg(fmt.Sprint(i)))
	}
	h.mustFinish()
	if got := f.payloads(validTopic); !sameSet(got, want) {
		t.Errorf("pstest holds %v, want each of %v once", got, want)
	}
	if n := creates.Load(); n != 1 || h.w.stats.topicsCreated.Load() != 1 {
		t.Errorf("CreateTopic called %d times (counted %d), want one repair creating it", n, h.w.stats.topicsCreated.Load())
	}
	got, err := f.admin.TopicAdminClient.GetTopic(context.Background(), &pubsubpb.GetTopicRequest{Topic: validTopic.String()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetMessageRetentionDuration().AsDuration() != opts.MessageRetention || got.GetKmsKeyName() != opts.KMSKeyName ||
		!reflect.DeepEqual(got.GetMessageStoragePolicy().GetAllowedPersistenceRegions(), opts.AllowedPersistenceRegions) ||
		!got.GetMessageStoragePolicy().GetEnforceInTransit() {
		t.Errorf("created topic %v does not carry the create options %+v", got, opts)
	}
	if n := h.w.stats.byName.Load(errorClassName(codes.NotFound)); n < 1 || n > 4 {
		t.Errorf("publish_errors_NOT_FOUND %d, want one per failed request (1 to 4), not one per message", n)
	}
	if h.w.stats.records.Load() != 20 {
		t.Errorf("records_sent %d, want 20", h.w.stats.records.Load())
	}
}

// A NOT_FOUND followed by ALREADY_EXISTS (another writer created the topic)
// is repaired: creation is idempotent.
func TestPstestNotFoundThenAlreadyExists(t *testing.T) {
	var publishes, creates atomic.Int64
	f := newFakeServer(t,
		publishFails(&publishes, func(_ *pubsubpb.PublishRequest, n int64) error {
			if n == 1 {
				return status.Error(codes.NotFound, "topic not found")
			}
			return nil
		}),
		countCalls("CreateTopic", &creates))
	f.createTopic(t, validTopic)
	creates.Store(0)
	h := f.harness(t, Config{})
	h.mustProcess(msg("a"))
	h.mustProcess(msg("b"))
	h.mustFinish()
	if got := f.payloads(validTopic); !sameSet(got, []string{"a", "b"}) {
		t.Errorf("pstest holds %v", got)
	}
	if creates.Load() != 1 || h.w.stats.topicsCreated.Load() != 1 {
		t.Errorf("CreateTopic calls %d, topics_created %d; want 1 and 1", creates.Load(), h.w.stats.topicsCreated.Load())
	}
}

// The republish backs off between attempts: 100 ms doubling, +-25 %.
func TestPstestRepairBacksOff(t *testing.T) {
	var publishes atomic.Int64
	f := newFakeServer(t, publishFails(&publishes, func(_ *pubsubpb.PublishRequest, n int64) error {
		if n <= 4 { // the first publish and three republishes
			return status.Error(codes.NotFound, "metadata not propagated yet")
		}
		return nil
	}))
	f.createTopic(t, validTopic)
	h := f.harness(t, Config{RecoveryInitialBackoff: 100 * time.Millisecond, RecoveryMaxBackoff: 400 * time.Millisecond})
	h.mustProcess(msg("a"))
	start := time.Now()
	h.mustFinish()
	took := time.Since(start)
	// Republish 1 is immediate; 2, 3 and 4 wait 100, 200 and 400 ms +-25 %.
	if min := 3 * (100 + 200 + 400) * time.Millisecond / 4; took < min {
		t.Errorf("the repair took %v; with its backoff it cannot take less than %v", took, min)
	}
	if n := publishes.Load(); n != 5 {
		t.Errorf("%d publish requests, want 5", n)
	}
	if got := f.payloads(validTopic); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("pstest holds %v", got)
	}
}

func TestPstestCreateNever(t *testing.T) {
	var creates atomic.Int64
	f := newFakeServer(t, countCalls("CreateTopic", &creates))
	h := f.harness(t, Config{CreateDisposition: CreateNever})
	h.mustProcess(msg("a"))
	err := h.finish()
	if err == nil || !strings.Contains(err.Error(), "CreateDisposition is CREATE_NEVER") || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("got %v", err)
	}
	if creates.Load() != 0 {
		t.Error("CreateNever created the topic")
	}
}

// rejectBadAttribute fails a whole Publish request with INVALID_ARGUMENT
// when any message carries the attribute bad, as Pub/Sub rejects a batch:
// all or nothing, without saying which message.
func rejectBadAttribute(calls *atomic.Int64) pstest.ServerReactorOption {
	return publishFails(calls, func(req *pubsubpb.PublishRequest, _ int64) error {
		for _, m := range req.GetMessages() {
			if _, ok := m.GetAttributes()["bad"]; ok {
				return status.Error(codes.InvalidArgument, "Invalid attribute")
			}
		}
		return nil
	})
}

// One bad message co-batched with good ones: the good ones are published,
// exactly the bad one is routed, and the error class counts one rejection.
func TestPstestIsolationRoutesExactlyTheBadMessage(t *testing.T) {
	var publishes atomic.Int64
	f := newFakeServer(t, rejectBadAttribute(&publishes))
	f.createTopic(t, validTopic)
	h := f.harness(t, Config{FailurePolicy: model.PolicyDeadLetter, Publisher: PublisherOptions{CountThreshold: 100, DelayThreshold: time.Hour}})
	bad := model.Message{Data: []byte("bad"), Attributes: map[string]string{"bad": "1"}}
	for i := range 6 {
		if i == 3 {
			h.mustProcess(bad)
			continue
		}
		h.mustProcess(msg(fmt.Sprint(i)))
	}
	h.mustFinish()
	if got := f.payloads(validTopic); !sameSet(got, []string{"0", "1", "2", "4", "5"}) {
		t.Errorf("pstest holds %v, want the five good messages", got)
	}
	dl := h.deadLetters()
	if len(dl) != 1 || string(dl[0].Message.Data) != "bad" || dl[0].Stage != dlq.StagePublish || dl[0].Code != "INVALID_ARGUMENT" ||
		dl[0].Attempts != 2 || dl[0].Topic != validTopic {
		t.Fatalf("dead letters %+v, want exactly the bad message, stage publish, INVALID_ARGUMENT, 2 attempts", dl)
	}
	if h.w.stats.byName.Load(errorClassName(codes.InvalidArgument)) != 1 || h.w.stats.sendErrors.Load() != 1 || h.w.stats.records.Load() != 5 {
		t.Errorf("INVALID_ARGUMENT %d, send_errors %d, records %d; want 1, 1, 5",
			h.w.stats.byName.Load(errorClassName(codes.InvalidArgument)), h.w.stats.sendErrors.Load(), h.w.stats.records.Load())
	}
	// one batch, then one request per message of it
	if n := publishes.Load(); n != 7 {
		t.Errorf("%d publish requests, want 7 (the batch, then each of its 6 messages alone)", n)
	}
}

// With the real client and ordering: a rejected keyed message pauses its
// key, the client cancels the key's queued messages, and the writer drops
// the bad one and republishes the rest in order; another key is unaffected.
func TestPstestOrderingCascadeDropResumesInOrder(t *testing.T) {
	var publishes atomic.Int64
	hold, release := holdPublishes(t)
	f := newFakeServer(t, hold, rejectBadAttribute(&publishes))
	f.createTopic(t, validTopic)
	h := f.harness(t, Config{FailurePolicy: model.PolicyDrop, Publisher: PublisherOptions{CountThreshold: 1, EnableMessageOrdering: true}})
	var wantK, wantJ []string
	for i := range 12 {
		if i == 2 {
			h.mustProcess(model.Message{Data: []byte("bad"), OrderingKey: "k", Attributes: map[string]string{"bad": "1"}})
		}
		k := fmt.Sprintf("k%d", i)
		j := fmt.Sprintf("j%d", i)
		wantK, wantJ = append(wantK, k), append(wantJ, j)
		h.mustProcess(model.Message{Data: []byte(k), OrderingKey: "k"})
		h.mustProcess(model.Message{Data: []byte(j), OrderingKey: "j"})
	}
	release()
	h.mustFinish()
	if got := f.payloads(validTopic, "k"); !reflect.DeepEqual(got, wantK) {
		t.Errorf("key k arrived as %v, want %v", got, wantK)
	}
	if got := f.payloads(validTopic, "j"); !reflect.DeepEqual(got, wantJ) {
		t.Errorf("key j arrived as %v, want %v", got, wantJ)
	}
	if h.w.stats.dropped.Load() != 1 || h.w.stats.byName.Load(errorClassName(codes.InvalidArgument)) != 1 {
		t.Errorf("dropped %d, INVALID_ARGUMENT %d; want 1 and 1", h.w.stats.dropped.Load(), h.w.stats.byName.Load(errorClassName(codes.InvalidArgument)))
	}
	if h.w.stats.cascaded == 0 {
		t.Errorf("the client cancelled nothing behind the rejected message; the test did not exercise a cascade")
	}
	// The key works afterwards: FinishBundle left it resumed.
	h.w.startBundle()
	h.mustProcess(model.Message{Data: []byte("after"), OrderingKey: "k"})
	h.mustFinish()
	if got := f.payloads(validTopic, "k"); got[len(got)-1] != "after" {
		t.Errorf("key k after the bundle: %v", got)
	}
}

// Ordering holds across the NOT_FOUND repair: the topic is created and
// every key's messages arrive in publish order.
func TestPstestOrderingAcrossTopicCreation(t *testing.T) {
	hold, release := holdPublishes(t)
	f := newFakeServer(t, hold)
	h := f.harness(t, Config{Publisher: PublisherOptions{CountThreshold: 1, EnableMessageOrdering: true}})
	want := map[string][]string{}
	for i := range 15 {
		for _, k := range []string{"a", "b", "c"} {
			d := fmt.Sprintf("%s%d", k, i)
			want[k] = append(want[k], d)
			h.mustProcess(model.Message{Data: []byte(d), OrderingKey: k})
		}
	}
	release()
	h.mustFinish()
	for k, w := range want {
		if got := f.payloads(validTopic, k); !reflect.DeepEqual(got, w) {
			t.Errorf("key %s arrived as %v, want %v", k, got, w)
		}
	}
	if h.w.stats.topicsCreated.Load() != 1 || h.w.stats.cascaded == 0 {
		t.Errorf("topics_created %d, cascaded %d; want a repair with a cascade", h.w.stats.topicsCreated.Load(), h.w.stats.cascaded)
	}
}

// UNAVAILABLE, retried by the client until Timeout, fails the bundle even
// under a dropping policy.
func TestPstestUnavailableFailsTheBundleUnderDrop(t *testing.T) {
	f := newFakeServer(t, pstest.WithErrorInjection("Publish", codes.Unavailable, "backend down"))
	f.createTopic(t, validTopic)
	h := f.harness(t, Config{FailurePolicy: model.PolicyDrop, Publisher: PublisherOptions{Timeout: time.Second, RetryInitialBackoff: 10 * time.Millisecond, RetryMaxBackoff: 100 * time.Millisecond}})
	h.mustProcess(msg("a"))
	err := h.finish()
	if err == nil || !(strings.Contains(err.Error(), "UNAVAILABLE") || strings.Contains(err.Error(), "DEADLINE_EXCEEDED")) {
		t.Fatalf("FinishBundle returned %v, want the outage", err)
	}
	if h.w.stats.dropped.Load() != 0 || len(f.payloads(validTopic)) != 0 {
		t.Errorf("the outage was dropped (%d) or published", h.w.stats.dropped.Load())
	}
}

// The size limit checked before sending is exactly the client's: a message
// of that size gets past the client's batcher, one byte more is refused by
// the client itself (ErrOversizedMessage), which would also pause its key.
// (pstest's gRPC server takes at most 4 MiB, so the first is refused by the
// server; only the client's verdict matters here.)
func TestSizeLimitMatchesTheClient(t *testing.T) {
	f := newFakeServer(t)
	f.createTopic(t, validTopic)
	pub := f.admin.Publisher(validTopic.String())
	pub.PublishSettings.Timeout = time.Second // the server's refusal is retried until then
	defer pub.Stop()
	limit := maxMessageSize(validTopic)
	ctx := guard(t)
	for _, tc := range []struct {
		size     int
		oversize bool
	}{{limit, false}, {limit + 1, true}} {
		m := model.Message{Data: make([]byte, tc.size-1-4)}
		if messageSize(m) != tc.size {
			t.Fatalf("setup: size %d", messageSize(m))
		}
		_, err := pub.Publish(ctx, &pubsub.Message{Data: m.Data}).Get(ctx)
		if got := errors.Is(err, pubsub.ErrOversizedMessage); got != tc.oversize {
			t.Errorf("a %d-byte message (limit %d): client error %v", tc.size, limit, err)
		}
		if got := checkLimits(validTopic, m, messageSize(m)) != nil; got != tc.oversize {
			t.Errorf("a %d-byte message: checkLimits rejects it: %v, the client: %v", tc.size, got, tc.oversize)
		}
	}
}

// A topic that sees a trickle gets one batch per bundle at the default
// DelayThreshold: the batch waits for the bundle's end, where the writer
// waits for every publish anyway. The 10 ms the client would wait sent
// each message of this trickle in an RPC of its own.
func TestPstestTrickleLeavesInOneBatch(t *testing.T) {
	var publishes atomic.Int64
	f := newFakeServer(t, countCalls("Publish", &publishes))
	f.createTopic(t, validTopic)
	h := f.harness(t, Config{})
	// The input's shape, not a synchronization: messages 30 ms apart, three
	// times the client's default delay.
	const n, gap = 10, 30 * time.Millisecond
	var want []string
	for i := range n {
		if i > 0 {
			time.Sleep(gap)
		}
		want = append(want, fmt.Sprint(i))
		h.mustProcess(msg(fmt.Sprint(i)))
	}
	h.mustFinish()
	if got := f.payloads(validTopic); !sameSet(got, want) {
		t.Errorf("pstest holds %v, want each of %v once", got, want)
	}
	if got := publishes.Load(); got != 1 {
		t.Errorf("%d messages 30 ms apart in one bundle took %d Publish RPCs, want 1", n, got)
	}
}

// sameSet reports whether got holds each of want exactly once.
func sameSet(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] != 1 {
			return false
		}
	}
	return true
}
