package sink

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// roundRobin processes n messages over topics destinations in turn, each
// with the ordering key keys[i/topics % len(keys)] when keys are given, and
// returns the payloads per destination and key in publish order.
func roundRobin(h *harness, n, topics int, keys ...string) map[model.Topic]map[string][]string {
	want := map[model.Topic]map[string][]string{}
	for i := range n {
		topic := topicN(i % topics)
		m := msg(fmt.Sprint(i), topic)
		if len(keys) > 0 {
			m.OrderingKey = keys[i/topics%len(keys)]
		}
		if want[topic] == nil {
			want[topic] = map[string][]string{}
		}
		want[topic][m.OrderingKey] = append(want[topic][m.OrderingKey], string(m.Data))
		h.mustProcess(m)
	}
	return want
}

// More destinations than MaxActivePublishers, round robin: every message
// arrives once in its own topic, and the messages still travel in batches.
// Evicting a publisher for each message to an uncached destination sent
// every message in a request of its own (3,000 requests for 3,000).
func TestPstestDestinationsBeyondTheCacheBatch(t *testing.T) {
	const topics, perTopic, cache = 30, 100, 10
	var publishes atomic.Int64
	f := newFakeServer(t, countCalls("Publish", &publishes))
	for i := range topics {
		f.createTopic(t, topicN(i))
	}
	h := f.harness(t, Config{MaxActivePublishers: cache})
	want := roundRobin(h, topics*perTopic, topics)
	h.mustFinish()
	for topic, byKey := range want {
		if got := f.payloads(topic); !sameSet(got, byKey[""]) {
			t.Errorf("%s holds %d messages, want each of its %d once", topic, len(got), len(byKey[""]))
		}
	}
	n := publishes.Load()
	t.Logf("%d publish requests for %d messages to %d topics through %d publishers", n, topics*perTopic, topics, cache)
	if max := int64(topics * perTopic / 30); n > max {
		t.Errorf("%d publish requests for %d messages, want at most %d: batching did not survive the publisher cache", n, topics*perTopic, max)
	}
	if h.w.stats.records.Load() != topics*perTopic || len(h.w.dests) > cache {
		t.Errorf("records_sent %d, %d publishers; want %d and at most %d", h.w.stats.records.Load(), len(h.w.dests), topics*perTopic, cache)
	}
}

// Ordering keys over more destinations than MaxActivePublishers, with half
// of the topics missing (a NOT_FOUND repair each) and caps that make
// groups leave at their batch threshold, at MaxGroupedMessages and at the
// end of the bundle: every key of every topic arrives in publish order.
func TestPstestOrderingKeysBeyondTheCache(t *testing.T) {
	const topics, cache = 12, 4
	f := newFakeServer(t)
	for i := range topics / 2 {
		f.createTopic(t, topicN(2*i))
	}
	h := f.harness(t, Config{
		MaxActivePublishers: cache,
		MaxInFlightMessages: 50,
		MaxGroupedMessages:  20,
		Publisher:           PublisherOptions{CountThreshold: 5, EnableMessageOrdering: true},
	})
	want := roundRobin(h, 1200, topics, "a", "b", "a", "c")
	h.mustFinish()
	for topic, byKey := range want {
		for k, w := range byKey {
			if got := f.payloads(topic, k); !reflect.DeepEqual(got, w) {
				t.Errorf("%s key %s arrived as %v, want %v", topic, k, got, w)
			}
		}
	}
	if n := h.w.stats.topicsCreated.Load(); n != topics/2 {
		t.Errorf("topics_created %d, want %d", n, topics/2)
	}
}

// A message to a destination with no publisher at a full cache waits in
// its group: nothing is evicted until the group fills a batch, which then
// costs one eviction and leaves in one batch; later messages to the
// destination go to its publisher.
func TestGroupWaitsForABatchThenEvictsOnce(t *testing.T) {
	be := newFakeBackend(3)
	h := newHarness(t, Config{MaxActivePublishers: 2, Publisher: PublisherOptions{CountThreshold: 3}}, be)
	a, b, c := topicN(0), topicN(1), topicN(2)
	for _, m := range []model.Message{msg("a", a), msg("b", b), msg("c1", c), msg("c2", c)} {
		h.mustProcess(m)
	}
	if len(be.publishers(c)) != 0 || be.publishers(a)[0].isStopped() || be.publishers(b)[0].isStopped() {
		t.Fatalf("a publisher was opened for %s or one evicted before its group filled a batch", c)
	}
	if h.w.groupedMsgs != 2 || h.w.inflightMsgs != 2 {
		t.Fatalf("%d grouped, %d in flight; want 2 and 2", h.w.groupedMsgs, h.w.inflightMsgs)
	}
	h.mustProcess(msg("c3", c))
	if e := be.waitEvent(t, "sent "+c.ID); e != "sent "+c.ID+" 3" {
		t.Errorf("the group left as %q, want one batch of 3", e)
	}
	if !be.publishers(a)[0].isStopped() || be.publishers(b)[0].isStopped() || len(h.w.groups) != 0 {
		t.Errorf("want the least recently used publisher (%s) evicted, %s kept and no group left", a, b)
	}
	h.mustProcess(msg("c4", c))
	h.mustFinish()
	if n := len(be.publishers(c)); n != 1 {
		t.Errorf("%s: %d publishers, want 1", c, n)
	}
	for topic, want := range map[model.Topic][]string{a: {"a"}, b: {"b"}, c: {"c1", "c2", "c3", "c4"}} {
		if got := be.delivered(topic); !reflect.DeepEqual(got, want) {
			t.Errorf("%s delivered %v, want %v", topic, got, want)
		}
	}
}

// A failed bundle's groups belong to elements the runner retries: the
// next bundle starts without them.
func TestFailedBundleDropsItsGroups(t *testing.T) {
	h := newHarness(t, Config{MaxActivePublishers: 1, Publisher: PublisherOptions{CountThreshold: 10}}, nil)
	h.mustProcess(msg("a", topicN(0)))
	h.mustProcess(msg("old", topicN(1)))
	if err := h.process(model.Message{Data: []byte("x"), OrderingKey: "k"}); err == nil {
		t.Fatal("want the ordering error")
	}
	h.w.startBundle()
	if len(h.w.groups) != 0 || h.w.groupedMsgs != 0 || h.w.groupedBytes != 0 {
		t.Fatalf("the new bundle starts with %d groups holding %d messages, %d bytes", len(h.w.groups), h.w.groupedMsgs, h.w.groupedBytes)
	}
	h.mustProcess(msg("new", topicN(1)))
	h.mustFinish()
	if got := h.be.delivered(topicN(1)); !reflect.DeepEqual(got, []string{"new"}) {
		t.Errorf("delivered %v, want only the new bundle's message", got)
	}
}

// A bad message in a group is isolated like any other: exactly it is
// routed, and the rest of its group arrives.
func TestPstestIsolationInsideAGroup(t *testing.T) {
	const topics = 6
	var publishes atomic.Int64
	f := newFakeServer(t, rejectBadAttribute(&publishes))
	for i := range topics {
		f.createTopic(t, topicN(i))
	}
	h := f.harness(t, Config{MaxActivePublishers: 2, FailurePolicy: model.PolicyDeadLetter, Publisher: PublisherOptions{CountThreshold: 10}})
	want := roundRobin(h, 30, topics)
	if _, cached := h.w.dests[topicN(3)]; cached {
		t.Fatalf("setup: %s has a publisher, so the bad message would join no group", topicN(3))
	}
	h.mustProcess(model.Message{Data: []byte("bad"), Topic: topicN(3), Attributes: map[string]string{"bad": "1"}})
	for i := range 30 {
		d := fmt.Sprint("late", i)
		want[topicN(i%topics)][""] = append(want[topicN(i%topics)][""], d)
		h.mustProcess(msg(d, topicN(i%topics)))
	}
	h.mustFinish()
	for topic, byKey := range want {
		if got := f.payloads(topic); !sameSet(got, byKey[""]) {
			t.Errorf("%s holds %v, want each of %v once", topic, got, byKey[""])
		}
	}
	dl := h.deadLetters()
	if len(dl) != 1 || string(dl[0].Message.Data) != "bad" || dl[0].Topic != topicN(3) || dl[0].Stage != dlq.StagePublish || dl[0].Code != "INVALID_ARGUMENT" {
		t.Fatalf("dead letters %+v, want exactly the bad message to %s, stage publish, INVALID_ARGUMENT", dl, topicN(3))
	}
}
