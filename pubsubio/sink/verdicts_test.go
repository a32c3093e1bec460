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

func TestMaxConsecutiveRejectionsFailsTheBundle(t *testing.T) {
	be := newFakeBackend(1000)
	be.verdict = rejectBad
	h := newHarness(t, Config{FailurePolicy: model.PolicyDrop, MaxConsecutiveRejections: 3}, be)
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
	h := newHarness(t, Config{FailurePolicy: model.PolicyDrop, MaxConsecutiveRejections: 3}, nil)
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
		h := newHarness(t, Config{FailurePolicy: model.PolicyDrop}, nil)
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
		h := newHarness(t, Config{FailurePolicy: model.PolicyDeadLetter}, nil)
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
	for _, policy := range []model.FailurePolicy{model.PolicyDrop, model.PolicyDeadLetter} {
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

// An ordering key is quoted cut, as attribute keys are: a 1 MiB key does
// not make a 1 MB job error, and a dropped 2 MiB key's warning stays a
// log line.
func TestHugeOrderingKeysAreNotQuotedWhole(t *testing.T) {
	const limit = 1 << 10
	t.Run("ordering disabled", func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		err := h.process(model.Message{Data: []byte("x"), OrderingKey: strings.Repeat("k", 1<<20)})
		if err == nil || !strings.Contains(err.Error(), "EnableMessageOrdering") || len(err.Error()) > limit {
			t.Errorf("error of %d bytes, want one of at most %d naming EnableMessageOrdering: %.300v", len(fmt.Sprint(err)), limit, err)
		}
	})
	t.Run("dropped", func(t *testing.T) {
		h := newHarness(t, Config{FailurePolicy: model.PolicyDrop, Publisher: PublisherOptions{EnableMessageOrdering: true}}, nil)
		h.mustProcess(model.Message{Data: []byte("x"), OrderingKey: strings.Repeat("k", 2<<20)})
		h.mustFinish()
		w := h.warnings()
		if len(w) != 1 || !strings.Contains(w[0], "ordering key is 2097152 bytes") || len(w[0]) > limit {
			t.Errorf("warnings %.300q, want one of at most %d bytes giving the key's size", w, limit)
		}
	})
}
