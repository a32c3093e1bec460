package source

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// goneAfterFirst answers the first GetSubscription as the server does and
// every later one with NotFound: the subscription vanished while the
// split's stream stayed open, as a restarted emulator or a deleted
// subscription looks from a stream the client retries.
type goneAfterFirst struct{ calls atomic.Int32 }

func (g *goneAfterFirst) React(any) (bool, any, error) {
	if g.calls.Add(1) == 1 {
		return false, nil, nil
	}
	return true, nil, status.Error(codes.NotFound, "Subscription does not exist")
}

// A bounded read that finds nothing for IdleTimeout ends only if its
// subscription still answers: a vanished one fails the bundle, naming it,
// instead of ending the read as if the backlog were read.
func TestIdleReadOfAVanishedSubscriptionFails(t *testing.T) {
	gone := &goneAfterFirst{}
	f := newFakeServer(t, pstest.ServerReactorOption{FuncName: "GetSubscription", Reactor: gone})
	_, subs := f.topicWithSubs(t, "vanishing", 1)
	fn := &readFn{ReadID: "vanishing", SplitCount: 1, Cfg: testConfig(t, func(c *Config) {
		c.Subscriptions = subs
		c.Connection = connection.Settings{EmulatorEndpoint: f.srv.Addr}
		c.PollDelay, c.IdleTimeout = 50*time.Millisecond, time.Second
	})}
	fn.Setup()
	defer fn.Teardown()
	split := Split{Index: 0, Subscription: subs[0]}
	emit := func(beam.EventTime, model.Message) { t.Error("a message from an empty subscription") }
	dead := func(beam.EventTime, dlq.FailedMessage) { t.Error("a dead letter from an empty subscription") }
	rest := Restriction{}
	deadline := time.Now().Add(time.Minute)
	for bundle := 0; ; bundle++ {
		if time.Now().After(deadline) {
			t.Fatalf("the read neither failed nor ended within a minute (%d bundles)", bundle)
		}
		rt := sdf.NewLockRTracker(newTracker(rest, processID))
		pc, err := fn.ProcessElement(context.Background(), fn.CreateWatermarkEstimator(0), rt, split, emit, dead)
		if err != nil {
			for _, want := range []string{subs[0].String(), "does not exist"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("bundle %d failed with %q, which does not contain %q", bundle, err, want)
				}
			}
			t.Logf("bundle %d failed: %v", bundle, err)
			return
		}
		_, res, err := rt.TrySplit(0)
		if err != nil || res == nil {
			t.Fatalf("bundle %d ended the read (%v, %v) although its subscription is gone", bundle, res, err)
		}
		rest = res.(Restriction)
		time.Sleep(pc.ResumeDelay()) // as the runner would
	}
}

// A message behind the watermark the split already reported is counted in
// late_messages; under LateDeadLetter it goes to the dead letters (stage
// late, at the watermark, saying both times) instead of downstream, where a
// fired window would drop it. Either way it is claimed, so acked with its
// bundle.
func TestLateMessagesAreCountedAndRouted(t *testing.T) {
	for _, policy := range []LatePolicy{LateEmit, LateDeadLetter} {
		t.Run(string(policy), func(t *testing.T) {
			cfg := testConfig(t, func(c *Config) { c.LatePolicy = policy })
			h := newReaderHarness(t, cfg)
			run := h.poll()
			watermark := h.clock.now().Add(-time.Minute)
			deliverTo(h.r, run, &pubsub.Message{ID: "late", PublishTime: watermark.Add(-time.Millisecond)}, &fakeHandle{}, "ack-late")
			deliverTo(h.r, run, &pubsub.Message{ID: "on-time", PublishTime: watermark}, &fakeHandle{}, "ack-on-time")
			fn := &readFn{Cfg: cfg}
			rt := sdf.NewLockRTracker(newTracker(Restriction{}, processID))
			var emitted []string
			var dead []dlq.FailedMessage
			out, err := fn.emitBatch(h.r, rt, 0, watermark, drain(h.r, 10, 0),
				func(_ beam.EventTime, m model.Message) { emitted = append(emitted, m.ID) },
				func(at beam.EventTime, f dlq.FailedMessage) {
					if !at.ToTime().Equal(watermark) {
						t.Errorf("dead letter at %v, want the watermark %v", at.ToTime(), watermark)
					}
					dead = append(dead, f)
				})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.claimed) != 2 {
				t.Errorf("claimed %d, want both: the late one is acked with its bundle", len(out.claimed))
			}
			h.checkCount("late_messages", lateMessages, 1)
			wantEmitted := []string{"late", "on-time"}
			if policy == LateDeadLetter {
				wantEmitted = []string{"on-time"}
				if len(dead) != 1 || dead[0].Stage != dlq.StageLate || dead[0].Message.ID != "late" ||
					!strings.Contains(dead[0].Error, watermark.UTC().Format(time.RFC3339Nano)) {
					t.Errorf("dead letters %+v, want the late message at stage late, naming the watermark", dead)
				}
			} else if len(dead) != 0 {
				t.Errorf("dead letters %+v under LateEmit, want none", dead)
			}
			if diff := cmp.Diff(wantEmitted, emitted); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}
		})
	}
}

// Read has no dead-letter output: it refuses LateDeadLetter at
// construction, naming it and ReadWithDeadLetters.
func TestReadRefusesLateDeadLetter(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	_, err := TryRead(s, Config{Subscriptions: testSubs(1), LatePolicy: LateDeadLetter})
	if err == nil || !strings.Contains(err.Error(), "LatePolicy") || !strings.Contains(err.Error(), "ReadWithDeadLetters") {
		t.Errorf("TryRead with LateDeadLetter: %v, want an error naming LatePolicy and ReadWithDeadLetters", err)
	}
}
