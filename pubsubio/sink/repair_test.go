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
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

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
	h := newHarness(t, Config{FailurePolicy: model.PolicyDrop, Publisher: PublisherOptions{CountThreshold: 1, EnableMessageOrdering: true}}, be)
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

// Under a routing policy, a message to a topic CreateNever must not create
// is a rejected message: dead-lettered (stage publish, NOT_FOUND) or
// dropped, and the bundle goes on.
func TestCreateNeverRoutesUnderARoutingPolicy(t *testing.T) {
	for _, policy := range []model.FailurePolicy{model.PolicyDeadLetter, model.PolicyDrop} {
		t.Run(string(policy), func(t *testing.T) {
			be := newFakeBackend(100)
			missing := topicN(9)
			be.verdict = func(topic model.Topic, batch []*pubsub.Message) error {
				if topic == missing {
					return status.Error(codes.NotFound, "Resource not found")
				}
				return nil
			}
			h := newHarness(t, Config{CreateDisposition: CreateNever, FailurePolicy: policy}, be)
			h.mustProcess(msg("lost", missing))
			h.mustProcess(msg("fine"))
			h.mustFinish()
			if len(be.created) != 0 {
				t.Error("CreateNever created a topic")
			}
			if got := be.delivered(validTopic); len(got) != 1 {
				t.Errorf("the good message's topic got %v, want [fine]", got)
			}
			dead := h.deadLetters()
			switch policy {
			case model.PolicyDeadLetter:
				if len(dead) != 1 || dead[0].Stage != dlq.StagePublish || dead[0].Code != "NOT_FOUND" || dead[0].Topic != missing {
					t.Errorf("dead letters %+v, want one for %s, stage publish, NOT_FOUND", dead, missing)
				}
			case model.PolicyDrop:
				if len(dead) != 0 || h.w.stats.dropped.Load() != 1 {
					t.Errorf("%d dead letters, %d dropped; want none and one", len(dead), h.w.stats.dropped.Load())
				}
			}
		})
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
