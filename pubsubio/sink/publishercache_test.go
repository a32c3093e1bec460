package sink

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

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
