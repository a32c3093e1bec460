package sink

import (
	"reflect"
	"testing"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

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
