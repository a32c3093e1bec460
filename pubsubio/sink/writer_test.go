package sink

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Writer tests against the in-memory fake (fake_test.go). Each runs under
// guard's timeout: a wait whose predicate never holds fails the test.

func TestFanOutToPerTopicPublishersAndReuse(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for i := range 30 {
		h.mustProcess(msg(fmt.Sprint(i), topicN(i%3)))
	}
	h.mustProcess(msg("default"))
	h.mustFinish()
	for i := range 3 {
		if n := len(h.be.publishers(topicN(i))); n != 1 {
			t.Errorf("%s: %d publishers, want 1 reused for all its messages", topicN(i), n)
		}
		if got := h.be.delivered(topicN(i)); len(got) != 10 {
			t.Errorf("%s: delivered %v, want 10 messages", topicN(i), got)
		}
	}
	if got := h.be.delivered(validTopic); !reflect.DeepEqual(got, []string{"default"}) {
		t.Errorf("default topic: delivered %v", got)
	}
	if h.w.stats.records.Load() != 31 || h.w.inflightMsgs != 0 || h.w.inflightBytes != 0 {
		t.Errorf("records %d, in flight %d/%d bytes; want 31, 0, 0", h.w.stats.records.Load(), h.w.inflightMsgs, h.w.inflightBytes)
	}

	h.w.startBundle()
	h.mustProcess(msg("again", topicN(0)))
	h.mustFinish()
	if n := len(h.be.publishers(topicN(0))); n != 1 {
		t.Errorf("a second bundle opened a new publisher: %d", n)
	}
}

// A new destination at the cap releases the least recently used publisher
// that holds nothing, even when a busier one is older.
func TestCapacityEvictsCleanPublisherFirst(t *testing.T) {
	be := newFakeBackend(1)
	be.hold = true
	h := newHarness(t, Config{MaxActivePublishers: 2, Publisher: PublisherOptions{CountThreshold: 1}}, be)
	a, b, c := topicN(0), topicN(1), topicN(2)
	h.mustProcess(msg("a", a)) // held: in flight
	be.mu.Lock()
	be.hold = false
	be.mu.Unlock()
	h.mustProcess(msg("b", b)) // confirmed at once
	if err := h.w.waitFor(h.ctx, "test", func() bool { return h.w.dests[b].inflight == 0 }); err != nil {
		t.Fatal(err)
	}
	h.mustProcess(msg("c", c))

	if !h.be.publishers(b)[0].isStopped() {
		t.Errorf("the clean publisher of %s was not released", b)
	}
	if h.be.publishers(a)[0].isStopped() {
		t.Errorf("the busy publisher of %s was released with a message in flight", a)
	}
	if _, ok := h.w.dests[a]; !ok || len(h.w.dests) != 2 {
		t.Errorf("cache holds %d publishers (want %s and %s)", len(h.w.dests), a, c)
	}
	h.be.publishers(a)[0].setHold(false)
	h.mustFinish()
	for topic, want := range map[model.Topic]string{a: "a", b: "b", c: "c"} {
		if got := h.be.delivered(topic); !reflect.DeepEqual(got, []string{want}) {
			t.Errorf("%s delivered %v, want [%s]", topic, got, want)
		}
	}
}

// When every publisher holds something, the writer drains everything and
// then releases the least recently used one: nothing is lost.
func TestCapacityDrainsThenReleasesWhenAllAreBusy(t *testing.T) {
	be := newFakeBackend(1)
	be.hold = true
	h := newHarness(t, Config{MaxActivePublishers: 2, Publisher: PublisherOptions{CountThreshold: 1}}, be)
	a, b, c := topicN(0), topicN(1), topicN(2)
	h.mustProcess(msg("a", a))
	h.mustProcess(msg("b", b))
	for range 2 {
		be.waitEvent(t, "sent ")
	}

	done := async(func() error { return h.process(msg("c", c)) })
	be.waitEvent(t, "flush ") // the drain flushes before it waits
	select {
	case err := <-done:
		t.Fatalf("the new destination was admitted before the busy publishers drained (err %v)", err)
	default:
	}
	if h.be.publishers(a)[0].release(-1) != 1 || h.be.publishers(b)[0].release(-1) != 1 {
		t.Fatal("expected one held batch per publisher")
	}
	if err := within(t, done, "process after the drain"); err != nil {
		t.Fatal(err)
	}
	if !h.be.publishers(a)[0].isStopped() || h.be.publishers(b)[0].isStopped() {
		t.Errorf("want the least recently used publisher (%s) released and %s kept", a, b)
	}
	h.be.publishers(c)[0].setHold(false)
	h.mustFinish()
	got := append(append(h.be.delivered(a), h.be.delivered(b)...), h.be.delivered(c)...)
	if !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("delivered %v, want a, b, c", got)
	}
}

// Publishers unused for longer than DestinationIdleTimeout are released
// after a successful FinishBundle; a later message reopens one.
func TestIdlePublishersReleasedAfterFinishBundle(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	clock := time.Unix(1_700_000_000, 0)
	h.w.now = func() time.Time { return clock }
	a, b := topicN(0), topicN(1)
	bundle := func(ms ...model.Message) {
		h.w.startBundle()
		for _, m := range ms {
			h.mustProcess(m)
		}
		h.mustFinish()
	}
	bundle(msg("a1", a), msg("b1", b))
	clock = clock.Add(30 * time.Minute)
	bundle(msg("b2", b))
	if _, ok := h.w.dests[a]; !ok {
		t.Fatalf("%s released after 30 min idle; the timeout is 1 h", a)
	}
	clock = clock.Add(31 * time.Minute)
	bundle(msg("b3", b))
	if _, ok := h.w.dests[a]; ok || !h.be.publishers(a)[0].isStopped() {
		t.Fatalf("%s not released after 61 min idle", a)
	}
	if _, ok := h.w.dests[b]; !ok {
		t.Fatalf("%s released though used 31 min ago", b)
	}
	bundle(msg("a2", a))
	if n := len(h.be.publishers(a)); n != 2 {
		t.Errorf("%s: %d publishers, want a new one after the release", a, n)
	}
	if got := h.be.delivered(a); !reflect.DeepEqual(got, []string{"a1", "a2"}) {
		t.Errorf("%s delivered %v", a, got)
	}
}

// With batching thresholds nothing reaches, only FinishBundle's flush sends
// anything, and it returns with everything confirmed, bundle after bundle.
func TestFinishBundleFlushesAndDrainsEverything(t *testing.T) {
	h := newHarness(t, Config{Publisher: PublisherOptions{CountThreshold: 1000}}, nil)
	for round := range 3 {
		h.w.startBundle()
		for i := range 50 {
			h.mustProcess(msg(fmt.Sprintf("r%d-%d", round, i), topicN(i%2)))
		}
		if n := len(h.be.delivered(topicN(0))) + len(h.be.delivered(topicN(1))); n != round*50 {
			t.Fatalf("round %d: %d delivered before the flush, want %d", round, n, round*50)
		}
		if h.w.inflightMsgs != 50 {
			t.Fatalf("round %d: %d in flight before FinishBundle, want 50", round, h.w.inflightMsgs)
		}
		h.mustFinish()
		if h.w.inflightMsgs != 0 || h.w.inflightBytes != 0 {
			t.Fatalf("round %d: FinishBundle returned with %d messages / %d bytes in flight", round, h.w.inflightMsgs, h.w.inflightBytes)
		}
	}
	if n := len(h.be.delivered(topicN(0))) + len(h.be.delivered(topicN(1))); n != 150 || h.w.stats.records.Load() != 150 {
		t.Errorf("delivered %d, counted %d; want 150", n, h.w.stats.records.Load())
	}
}

// A failure that arrives after ProcessElement returned is captured and
// returned by the next ProcessElement.
func TestAsyncErrorSurfacesInNextProcessElement(t *testing.T) {
	be := newFakeBackend(1)
	be.hold = true
	be.verdict = func(model.Topic, []*pubsub.Message) error { return status.Error(codes.Unavailable, "service down") }
	h := newHarness(t, Config{Publisher: PublisherOptions{CountThreshold: 1}}, be)
	h.mustProcess(msg("a"))
	h.be.publishers(validTopic)[0].release(-1)
	select { // the verdict is queued for the writer
	case <-h.w.done.notify:
	case <-time.After(10 * time.Second):
		t.Fatal("the verdict never reached the writer")
	}
	err := h.process(msg("b"))
	if err == nil || !strings.Contains(err.Error(), "UNAVAILABLE") {
		t.Fatalf("next ProcessElement returned %v, want the captured UNAVAILABLE", err)
	}
}

func TestAsyncErrorSurfacesInFinishBundle(t *testing.T) {
	be := newFakeBackend(100)
	be.verdict = func(model.Topic, []*pubsub.Message) error { return status.Error(codes.Unavailable, "service down") }
	h := newHarness(t, Config{}, be)
	h.mustProcess(msg("a"))
	h.mustProcess(msg("b"))
	err := h.finish()
	if err == nil || !strings.Contains(err.Error(), "UNAVAILABLE") {
		t.Fatalf("FinishBundle returned %v, want UNAVAILABLE", err)
	}
	if n := h.w.stats.byName.Load(errorClassName(codes.Unavailable)); n != 1 {
		t.Errorf("publish_errors_UNAVAILABLE = %d, want 1 (one failed batch of two messages)", n)
	}
}

// capHarness holds every sent batch, so in-flight messages stay in flight
// until the test releases them.
func capHarness(t *testing.T, cfg Config) *harness {
	be := newFakeBackend(1000)
	be.hold = true
	return newHarness(t, cfg, be)
}

// blocked starts process(m), checks it blocks at a cap (the writer flushes
// first, and nothing is released), and returns the pending result.
func (h *harness) blocked(m model.Message) <-chan error {
	h.t.Helper()
	done := async(func() error { return h.process(m) })
	h.be.waitEvent(h.t, "flush ")
	select {
	case err := <-done:
		h.t.Fatalf("process(%q) did not block at the cap (err %v)", m.Data, err)
	default:
	}
	return done
}

func TestMessageCapBlocksUntilACompletion(t *testing.T) {
	h := capHarness(t, Config{MaxInFlightMessages: 3})
	for i := range 3 {
		h.mustProcess(msg(fmt.Sprint(i)))
	}
	done := h.blocked(msg("3"))
	h.be.publishers(validTopic)[0].setHold(false)
	if err := within(t, done, "the blocked process"); err != nil {
		t.Fatal(err)
	}
	h.mustFinish()
	if h.w.stats.records.Load() != 4 {
		t.Errorf("records %d, want 4", h.w.stats.records.Load())
	}
}

func TestByteCapBlocksFarBelowTheMessageCap(t *testing.T) {
	h := capHarness(t, Config{MaxInFlightBytes: 1000})
	payload := strings.Repeat("x", 300) // 303 bytes serialized
	for range 3 {
		h.mustProcess(msg(payload))
	}
	done := h.blocked(msg(payload))
	if h.w.inflightMsgs != 3 || h.w.cfg.MaxInFlightMessages != 1000 {
		t.Fatalf("blocked with %d messages in flight against a message cap of %d", h.w.inflightMsgs, h.w.cfg.MaxInFlightMessages)
	}
	h.be.publishers(validTopic)[0].setHold(false)
	if err := within(t, done, "the blocked process"); err != nil {
		t.Fatal(err)
	}
	h.mustFinish()
}

// A message larger than the byte cap is admitted when nothing is in flight,
// never deadlocking; while it is in flight the next one waits.
func TestOversizedMessageAdmittedWhenNothingInFlight(t *testing.T) {
	h := capHarness(t, Config{MaxInFlightBytes: 100})
	h.mustProcess(msg(strings.Repeat("x", 5000)))
	if h.w.inflightBytes <= 100 {
		t.Fatalf("in-flight bytes %d, want the oversized message counted", h.w.inflightBytes)
	}
	done := h.blocked(msg("small"))
	h.be.publishers(validTopic)[0].setHold(false)
	if err := within(t, done, "the blocked process"); err != nil {
		t.Fatal(err)
	}
	h.mustFinish()
}

// A message without payload still counts as in flight, so FinishBundle
// waits for its confirmation.
func TestZeroBytePayloadCountsInFlight(t *testing.T) {
	h := capHarness(t, Config{})
	h.mustProcess(model.Message{Attributes: map[string]string{"kind": "marker"}})
	if h.w.inflightMsgs != 1 {
		t.Fatalf("in flight %d, want 1", h.w.inflightMsgs)
	}
	done := async(h.finish)
	h.be.waitEvent(t, "flush ")
	select {
	case err := <-done:
		t.Fatalf("FinishBundle returned (%v) before the zero-byte message was confirmed", err)
	default:
	}
	h.be.publishers(validTopic)[0].setHold(false)
	if err := within(t, done, "FinishBundle"); err != nil {
		t.Fatal(err)
	}
	if h.w.stats.records.Load() != 1 || h.w.stats.bytes.Load() != 0 {
		t.Errorf("records %d bytes %d, want 1 and 0", h.w.stats.records.Load(), h.w.stats.bytes.Load())
	}
}

// notFoundUntilCreated answers NOT_FOUND until the backend created a topic.
func notFoundUntilCreated(be *fakeBackend) func(model.Topic, []*pubsub.Message) error {
	return func(topic model.Topic, _ []*pubsub.Message) error {
		be.mu.Lock()
		defer be.mu.Unlock()
		if len(be.created) == 0 {
			return status.Errorf(codes.NotFound, "Resource not found (resource=%s)", topic.ID)
		}
		return nil
	}
}

// releaseObserved releases the held batch at index i of p and waits until
// the writer has classified its verdict, so that the test fixes the order
// in which failures are observed.
func (h *harness) releaseObserved(p *fakePub, i int) {
	h.t.Helper()
	p.mu.Lock()
	b := p.held[i]
	p.held = append(p.held[:i:i], p.held[i+1:]...)
	p.resolveLocked(b)
	p.mu.Unlock()
	select {
	case <-h.w.done.notify:
	case <-time.After(10 * time.Second):
		h.t.Fatal("the verdict never reached the writer")
	}
	h.w.poll(h.ctx)
}

// Parked messages are republished in publish order, however their failures
// were observed. Verdicts of one lane (destination and ordering key) are
// observed in publish order by construction (completions.go), so the
// messages take five keys: five lanes whose verdicts can arrive in any order.
func TestRepairRepublishesInPublishOrderNotFailureOrder(t *testing.T) {
	be := newFakeBackend(1)
	be.hold = true
	be.verdict = notFoundUntilCreated(be)
	h := newHarness(t, Config{Publisher: PublisherOptions{CountThreshold: 1, EnableMessageOrdering: true}}, be)
	for i := range 5 {
		h.mustProcess(model.Message{Data: []byte(fmt.Sprint(i)), OrderingKey: fmt.Sprint("k", i)})
	}
	p := be.publishers(validTopic)[0]
	for i := 4; i >= 0; i-- { // failures observed last to first
		h.releaseObserved(p, i)
	}
	if d := h.w.dests[validTopic]; len(d.parked) != 5 || string(d.parked[0].msg.Data) != "4" {
		t.Fatalf("parked %d messages, first %q; want 5 in failure order", len(d.parked), d.parked[0].msg.Data)
	}
	p.setHold(false)
	h.mustFinish()
	if got := be.delivered(validTopic); !reflect.DeepEqual(got, []string{"0", "1", "2", "3", "4"}) {
		t.Errorf("republished %v, want publish order", got)
	}
	if len(be.created) != 1 || h.w.stats.topicsCreated.Load() != 1 {
		t.Errorf("created %d topics (counted %d), want one creation", len(be.created), h.w.stats.topicsCreated.Load())
	}
	if h.w.stats.records.Load() != 5 {
		t.Errorf("records_sent %d, want 5: a republished message counts once", h.w.stats.records.Load())
	}
}

// With ordering, a rejected keyed message pauses its key and the client
// cancels what is queued behind it. The cancellations are parked, the
// rejected message is confirmed alone and dropped, and the rest of the key
// is republished in order with the key resumed: no key left paused.
func TestOrderingCascadeParkResumeRepublishInOrder(t *testing.T) {
	be := newFakeBackend(1)
	be.hold = true
	be.verdict = func(_ model.Topic, batch []*pubsub.Message) error {
		for _, m := range batch {
			if string(m.Data) == "bad" {
				return status.Error(codes.InvalidArgument, "bad message")
			}
		}
		return nil
	}
	h := newHarness(t, Config{FailurePolicy: PolicyDrop, Publisher: PublisherOptions{CountThreshold: 1, EnableMessageOrdering: true}}, be)
	keyed := func(data string) model.Message {
		return model.Message{Data: []byte(data), OrderingKey: "k"}
	}
	h.mustProcess(keyed("bad"))
	for i := 1; i <= 4; i++ {
		h.mustProcess(keyed(fmt.Sprint(i)))
	}
	p := be.publishers(validTopic)[0]
	h.releaseObserved(p, 0) // "bad": the key pauses
	for range 4 {
		h.releaseObserved(p, 0) // the cascade, observed in its lane's order
	}
	p.setHold(false)
	h.mustFinish()
	if got := be.delivered(validTopic); !reflect.DeepEqual(got, []string{"1", "2", "3", "4"}) {
		t.Errorf("delivered %v, want the key's survivors in order", got)
	}
	if h.w.stats.dropped.Load() != 1 || h.w.stats.byName.Load(errorClassName(codes.InvalidArgument)) != 1 {
		t.Errorf("dropped %d, INVALID_ARGUMENT errors %d; want 1 and 1", h.w.stats.dropped.Load(), h.w.stats.byName.Load(errorClassName(codes.InvalidArgument)))
	}
	p.mu.Lock()
	paused := p.paused["k"]
	p.mu.Unlock()
	if paused || len(h.w.dests[validTopic].paused) != 0 {
		t.Errorf("FinishBundle returned with the key paused")
	}
}

func rejectBad(_ model.Topic, batch []*pubsub.Message) error {
	for _, m := range batch {
		if strings.HasPrefix(string(m.Data), "bad") {
			return status.Error(codes.InvalidArgument, "invalid message "+string(m.Data))
		}
	}
	return nil
}

func TestMaxConsecutiveRejectionsFailsTheBundle(t *testing.T) {
	be := newFakeBackend(1000)
	be.verdict = rejectBad
	h := newHarness(t, Config{FailurePolicy: PolicyDrop, MaxConsecutiveRejections: 3}, be)
	for i := range 5 {
		h.mustProcess(msg(fmt.Sprintf("bad%d", i)))
	}
	err := h.finish()
	for _, want := range []string{"MaxConsecutiveRejections 3", "3 messages in a row", "InvalidArgument", "invalid message bad2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("FinishBundle error %v does not mention %q", err, want)
		}
	}
	if h.w.stats.dropped.Load() != 3 {
		t.Errorf("dropped %d, want the 3 rejections up to and including the tripping one", h.w.stats.dropped.Load())
	}
}

// Any successful publish resets the count. Validation rejections count
// too: they are what Pub/Sub would reject.
func TestSuccessResetsConsecutiveRejections(t *testing.T) {
	h := newHarness(t, Config{FailurePolicy: PolicyDrop, MaxConsecutiveRejections: 3}, nil)
	bad := model.Message{Data: []byte("x"), Attributes: map[string]string{"goog-reserved": "1"}}
	confirmed := func() {
		if err := h.w.waitFor(h.ctx, "test", func() bool { return h.w.inflightMsgs == 0 }); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []model.Message{bad, bad, msg("good"), bad, bad, msg("good"), bad, bad} {
		h.mustProcess(m)
		h.w.flushAll()
		confirmed()
	}
	h.mustFinish()
	if h.w.stats.dropped.Load() != 6 || h.w.rejections != 2 {
		t.Errorf("dropped %d with %d consecutive at the end; want 6 and 2", h.w.stats.dropped.Load(), h.w.rejections)
	}
	if err := h.process(bad); err == nil || !strings.Contains(err.Error(), "MaxConsecutiveRejections 3") {
		t.Errorf("a third consecutive rejection returned %v", err)
	}
}

func TestFailurePolicies(t *testing.T) {
	bad := model.Message{Data: []byte("payload"), Attributes: map[string]string{"googx": "1"}, ID: "src-1"}
	t.Run("fail", func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		err := h.process(bad)
		for _, want := range []string{"FailurePolicy is FAIL", `attribute key "googx" starts with "goog"`, validTopic.String(), "DROP", "DEAD_LETTER"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v does not mention %q", err, want)
			}
		}
	})
	t.Run("drop", func(t *testing.T) {
		h := newHarness(t, Config{FailurePolicy: PolicyDrop}, nil)
		h.mustProcess(bad)
		h.mustProcess(msg("good"))
		h.mustFinish()
		if h.w.stats.dropped.Load() != 1 || h.w.stats.sendErrors.Load() != 1 || len(h.deadLetters()) != 0 {
			t.Errorf("dropped %d, send errors %d, dead letters %d", h.w.stats.dropped.Load(), h.w.stats.sendErrors.Load(), len(h.deadLetters()))
		}
		w := h.warnings()
		if len(w) != 1 || !strings.Contains(w[0], "dropping a message to "+validTopic.String()) || !strings.Contains(w[0], "InvalidArgument") {
			t.Errorf("warnings %q, want one naming the destination and the status", w)
		}
		if got := h.be.delivered(validTopic); !reflect.DeepEqual(got, []string{"good"}) {
			t.Errorf("delivered %v", got)
		}
	})
	t.Run("dead letter", func(t *testing.T) {
		h := newHarness(t, Config{FailurePolicy: PolicyDeadLetter}, nil)
		h.mustProcess(bad)
		h.mustFinish()
		dl := h.deadLetters()
		if len(dl) != 1 {
			t.Fatalf("%d dead letters, want 1", len(dl))
		}
		f := dl[0]
		if f.Stage != dlq.StageValidate || f.Code != "INVALID_ARGUMENT" || f.Topic != validTopic || f.Attempts != 0 ||
			!reflect.DeepEqual(f.Message, bad) || !strings.Contains(f.Error, "goog") || f.Time.IsZero() {
			t.Errorf("dead letter %+v", f)
		}
	})
}

// An outage never reaches a dropping policy: it fails the bundle.
func TestOutageIsNeverRouted(t *testing.T) {
	for _, policy := range []FailurePolicy{PolicyDrop, PolicyDeadLetter} {
		for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.PermissionDenied} {
			t.Run(fmt.Sprint(policy, code), func(t *testing.T) {
				be := newFakeBackend(100)
				be.verdict = func(model.Topic, []*pubsub.Message) error { return status.Error(code, "outage") }
				h := newHarness(t, Config{FailurePolicy: policy}, be)
				h.mustProcess(msg("a"))
				err := h.finish()
				if err == nil || !strings.Contains(err.Error(), grpccode.Name(code)) {
					t.Fatalf("FinishBundle returned %v, want a failure naming %s", err, grpccode.Name(code))
				}
				if h.w.stats.sendErrors.Load() != 0 || len(h.deadLetters()) != 0 {
					t.Errorf("an outage reached the failure policy")
				}
			})
		}
	}
}

// Releasing publishers whose stop never returns costs one ShutdownTimeout
// for all of them together; each abandoned stop is logged and counted.
func TestReleaseBoundedWhenStopNeverReturns(t *testing.T) {
	be := newFakeBackend(100)
	be.stopGate = make(chan struct{})
	t.Cleanup(func() { close(be.stopGate) })
	const timeout = time.Second
	h := newHarness(t, Config{ShutdownTimeout: timeout}, be)
	h.mustProcess(msg("a", topicN(0)))
	h.mustProcess(msg("b", topicN(1)))
	h.mustFinish()
	before := shutdownsAbandoned.Load()
	start := time.Now()
	if err := h.w.shutdown(h.ctx, "teardown"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < timeout || took > 2*timeout-100*time.Millisecond {
		t.Errorf("releasing two stuck publishers took %v; want one ShutdownTimeout (%v), not one per publisher", took, timeout)
	}
	if n := shutdownsAbandoned.Load() - before; n != 2 {
		t.Errorf("abandoned %d, want 2", n)
	}
	w := strings.Join(h.warnings(), "\n")
	for i := range 2 {
		if !strings.Contains(w, topicN(i).String()+" did not stop within ShutdownTimeout 1s") {
			t.Errorf("no warning names %s:\n%s", topicN(i), w)
		}
	}
	if !be.closed {
		t.Error("the connection was not closed")
	}
}

func TestProgressTimeoutFailsAndWarns(t *testing.T) {
	h := capHarness(t, Config{PublishProgressTimeout: 500 * time.Millisecond})
	h.mustProcess(msg("a"))
	err := h.finish()
	for _, want := range []string{"PublishProgressTimeout 500ms", "none of 1 outstanding", "flushing at the end of the bundle"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("FinishBundle error %v does not mention %q", err, want)
		}
	}
	w := h.warnings()
	if len(w) == 0 || !strings.Contains(w[0], "Pub/Sub has answered none of 1 outstanding publishes") {
		t.Errorf("warnings %q, want the stall named", w)
	}
	if len(w) > 10 {
		t.Errorf("%d warnings in one budget, want at most one per tenth", len(w))
	}
}

// The budget bounds a stall, not a slow topic: it restarts at every
// completion, so a wait longer than the budget in total succeeds while
// verdicts keep arriving.
func TestProgressBudgetRestartsAtEveryCompletion(t *testing.T) {
	be := newFakeBackend(1)
	be.hold = true
	h := newHarness(t, Config{PublishProgressTimeout: 2 * time.Second, Publisher: PublisherOptions{CountThreshold: 1}}, be)
	for i := range 8 {
		h.mustProcess(msg(fmt.Sprint(i)))
	}
	p := be.publishers(validTopic)[0]
	go func() {
		for p.release(1) == 1 { // pacing a slow topic, not synchronizing
			time.Sleep(400 * time.Millisecond)
		}
	}()
	start := time.Now()
	h.mustFinish()
	if took := time.Since(start); took < 2*time.Second {
		t.Logf("the drain took %v, less than the budget; the test proves nothing on this run", took)
	}
}

func TestBadInputFailsNamingTheValue(t *testing.T) {
	t.Run("no topic anywhere", func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		h.w.cfg.Topic = model.Topic{}
		err := h.process(msg("a"))
		if err == nil || !strings.Contains(err.Error(), "no Topic and WriteConfig.Topic is unset") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("malformed message topic", func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		err := h.process(msg("a", model.TopicOf("pubsubio-test", "goog-bad")))
		if err == nil || !strings.Contains(err.Error(), `"projects/pubsubio-test/topics/goog-bad"`) || !strings.Contains(err.Error(), "Message.Topic") {
			t.Fatalf("got %v", err)
		}
		if len(h.be.publishers(model.TopicOf("pubsubio-test", "goog-bad"))) != 0 {
			t.Error("a publisher was opened for a malformed topic")
		}
	})
	t.Run("ordering key without ordering", func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		err := h.process(model.Message{Data: []byte("a"), OrderingKey: "k"})
		if err == nil || !strings.Contains(err.Error(), "Publisher.EnableMessageOrdering") || !strings.Contains(err.Error(), `"k"`) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestCreateNeverFailsNamingTheDisposition(t *testing.T) {
	be := newFakeBackend(100)
	be.verdict = notFoundUntilCreated(be)
	h := newHarness(t, Config{CreateDisposition: CreateNever}, be)
	h.mustProcess(msg("a"))
	err := h.finish()
	if err == nil || !strings.Contains(err.Error(), "CreateDisposition is CREATE_NEVER") || !strings.Contains(err.Error(), validTopic.String()) {
		t.Fatalf("got %v", err)
	}
	if len(be.created) != 0 {
		t.Error("CreateNever created a topic")
	}
}

func TestTopicCreationOutcomes(t *testing.T) {
	t.Run("already exists is success", func(t *testing.T) {
		be := newFakeBackend(100)
		first := true
		be.verdict = func(model.Topic, []*pubsub.Message) error {
			if first {
				first = false
				return status.Error(codes.NotFound, "not yet")
			}
			return nil
		}
		be.createErr = status.Error(codes.AlreadyExists, "a parallel writer won")
		h := newHarness(t, Config{}, be)
		h.mustProcess(msg("a"))
		h.mustFinish()
		if got := be.delivered(validTopic); !reflect.DeepEqual(got, []string{"a"}) || h.w.stats.topicsCreated.Load() != 1 {
			t.Errorf("delivered %v, topics_created %d", got, h.w.stats.topicsCreated.Load())
		}
	})
	t.Run("creation refused", func(t *testing.T) {
		be := newFakeBackend(100)
		be.verdict = func(model.Topic, []*pubsub.Message) error { return status.Error(codes.NotFound, "missing") }
		be.createErr = status.Error(codes.PermissionDenied, "no")
		h := newHarness(t, Config{}, be)
		h.mustProcess(msg("a"))
		err := h.finish()
		for _, want := range []string{"creating it failed", "roles/pubsub.editor", "CREATE_NEVER", "PermissionDenied"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v does not mention %q", err, want)
			}
		}
	})
	t.Run("republish keeps failing", func(t *testing.T) {
		be := newFakeBackend(100)
		be.verdict = func(model.Topic, []*pubsub.Message) error { return status.Error(codes.NotFound, "still missing") }
		h := newHarness(t, Config{RecoveryMaxAttempts: 3, RecoveryInitialBackoff: time.Millisecond, RecoveryMaxBackoff: 2 * time.Millisecond}, be)
		h.mustProcess(msg("a"))
		err := h.finish()
		for _, want := range []string{"within RecoveryMaxAttempts 3", "kept failing after the topic was created", "still missing"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v does not mention %q", err, want)
			}
		}
		if len(be.created) != 1 {
			t.Errorf("created %d times, want once per repair", len(be.created))
		}
	})
}

// After a failed bundle the next starts clean: the old bundle's late
// verdicts are neither routed nor counted against the caps.
func TestFailedBundleLeavesNothingBehind(t *testing.T) {
	be := newFakeBackend(1)
	be.hold = true
	h := newHarness(t, Config{Publisher: PublisherOptions{CountThreshold: 1}, MaxInFlightMessages: 1}, be)
	h.mustProcess(msg("a"))
	if err := h.process(model.Message{Data: []byte("b"), OrderingKey: "k"}); err == nil {
		t.Fatal("want the ordering error")
	}
	be.setVerdict(func(model.Topic, []*pubsub.Message) error { return status.Error(codes.Unavailable, "late") })
	h.w.startBundle()
	if h.w.inflightMsgs != 0 || h.w.failure != nil {
		t.Fatalf("the new bundle starts with %d in flight and error %v", h.w.inflightMsgs, h.w.failure)
	}
	be.publishers(validTopic)[0].release(-1) // the old bundle's verdict arrives late
	be.mu.Lock()
	be.verdict, be.hold = nil, false
	be.mu.Unlock()
	be.publishers(validTopic)[0].setHold(false)
	h.mustProcess(msg("c"))
	h.mustFinish()
	if got := be.delivered(validTopic); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("delivered %v", got)
	}
}

// The republish backoff doubles up to RecoveryMaxBackoff and stays there,
// however many attempts RecoveryMaxAttempts allows.
func TestRepairBackoffDoublesToTheMaximumAndStays(t *testing.T) {
	h := newHarness(t, Config{RecoveryInitialBackoff: 10 * time.Second, RecoveryMaxBackoff: time.Hour, RecoveryMaxAttempts: 100}, nil)
	h.w.rand = func() float64 { return 0.5 } // no jitter
	want := 10 * time.Second
	for n := 1; n < 100; n++ {
		if got := h.w.backoffDelay(n); got != want {
			t.Fatalf("wait before attempt %d: %v, want %v", n+1, got, want)
		}
		want = min(2*want, time.Hour)
	}
	h.w.rand = func() float64 { return 0 }
	if got, want := h.w.backoffDelay(99), 45*time.Minute; got != want {
		t.Errorf("with the jitter at -25%%: %v, want %v", got, want)
	}
}

// An outage's error says what to check, with the option to change when
// one applies.
func TestOutageErrorSaysWhatToDo(t *testing.T) {
	for code, want := range map[codes.Code][]string{
		codes.PermissionDenied:  {"roles/pubsub.publisher", validTopic.String()},
		codes.DeadlineExceeded:  {"Publisher.Timeout 1m0s"},
		codes.ResourceExhausted: {"quota", "MaxInFlightMessages", "MaxInFlightBytes"},
		codes.Unavailable:       {"Publisher.Timeout 1m0s"},
	} {
		t.Run(grpccode.Name(code), func(t *testing.T) {
			be := newFakeBackend(100)
			be.verdict = func(model.Topic, []*pubsub.Message) error { return status.Error(code, "outage") }
			h := newHarness(t, Config{}, be)
			h.mustProcess(msg("a"))
			err := h.finish()
			for _, w := range append(want, grpccode.Name(code)) {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("error %v does not mention %q", err, w)
				}
			}
		})
	}
}
