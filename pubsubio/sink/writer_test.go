package sink

import (
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The writer's tests run against the in-memory fake (helper_test.go), each
// under guard's timeout: a wait whose predicate never holds fails the test.

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
