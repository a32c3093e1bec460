package dedup

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestMain(m *testing.M) { ptest.Main(m) }

func init() {
	register.Function1x1(withIDAttribute)
	register.Function1x1(idOf)
	register.Function3x0(idInWindow)
	register.Function2x0(atMinute)
}

// withIDAttribute is a message carrying id in the attribute "id"; "" makes
// one without it.
func withIDAttribute(id string) model.Message {
	if id == "" {
		return model.Message{Data: []byte("no id")}
	}
	return model.Message{Data: []byte(id), Attributes: map[string]string{"id": id}}
}

func idOf(m model.Message) string { return m.Attributes["id"] }

// atMinute puts the message with id "name:m" at minute m.
func atMinute(id string, emit func(beam.EventTime, string)) {
	name, minute, _ := strings.Cut(id, ":")
	d, _ := time.ParseDuration(minute + "m")
	emit(mtime.FromTime(time.Unix(0, 0).Add(d)), name)
}

// idInWindow says which one-minute window a message landed in.
func idInWindow(w beam.Window, m model.Message, emit func(string)) {
	emit(m.Attributes["id"] + "@" + w.MaxTimestamp().ToTime().UTC().Format("15:04"))
}

// The first message of each attribute value passes, the copies do not; a
// message without the attribute passes under MissingPass and fails the
// bundle under MissingFail. Keyed by Message.ID, the same ID from two
// subscriptions is two messages.
func TestDeduplicateOnPrism(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, withIDAttribute, beam.Create(s, "a", "b", "a", "c", "b", "a", ""))
	out := Deduplicate(s, Config{IDAttribute: "id", TimeDomain: EventTime}, msgs)
	passert.Equals(s, beam.ParDo(s, idOf, out), "a", "b", "c", "")

	subA, subB := model.SubscriptionOf("p", "sub-a"), model.SubscriptionOf("p", "sub-b")
	byID := beam.Create(s,
		model.Message{ID: "1", Subscription: subA}, model.Message{ID: "1", Subscription: subA},
		model.Message{ID: "1", Subscription: subB}, model.Message{ID: "2", Subscription: subB})
	passert.Count(s, Deduplicate(s, Config{TimeDomain: EventTime}, byID), "by ID within a subscription", 3)
	if err := ptest.Run(p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}

	p, s = beam.NewPipelineWithRoot()
	Deduplicate(s, Config{IDAttribute: "id", Missing: MissingFail}, beam.ParDo(s, withIDAttribute, beam.Create(s, "a", "")))
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), `has no attribute "id" to deduplicate on, and Missing is FAIL`) {
		t.Errorf("MissingFail on a message without the attribute: %v; want the bundle failed naming the attribute", err)
	}
}

// Keys are remembered across windows, and what passes keeps its window:
// the copy of a in the next minute's window is dropped.
func TestDeduplicateAcrossWindows(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	timed := beam.ParDo(s, atMinute, beam.Create(s, "a:0", "b:0", "a:1", "c:1"))
	windowed := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, withIDAttribute, timed))
	out := Deduplicate(s, Config{IDAttribute: "id", TimeDomain: EventTime}, windowed)
	labelled := beam.WindowInto(s, window.NewGlobalWindows(), beam.ParDo(s, idInWindow, out))
	passert.Equals(s, labelled, "a@00:00", "b@00:00", "c@00:01")
	if err := ptest.Run(p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
}

// A key is forgotten once its timer fires, Horizon after its first
// message on the configured clock: a copy before that is dropped, a copy
// after it passes. TestStream moves each clock by hand.
func TestDeduplicateForgetsAfterHorizon(t *testing.T) {
	const horizon = time.Hour
	for _, domain := range []TimeDomain{EventTime, ProcessingTime} {
		t.Run(string(domain), func(t *testing.T) {
			c := teststream.NewConfig()
			t0 := mtime.FromTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).Milliseconds()
			step := func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			step(c.AddElements(t0, "a", "b"))
			step(c.AddElements(t0+1, "a")) // within the horizon: dropped
			if domain == EventTime {
				step(c.AdvanceWatermark(t0 + 2*horizon.Milliseconds()))
			} else {
				// The watermark steps around it make Prism finish the bundles
				// before and the timers of the advance before going on.
				step(c.AdvanceWatermark(t0 + 2))
				c.AdvanceProcessingTime(2 * horizon.Milliseconds())
				step(c.AdvanceWatermark(t0 + 3))
			}
			step(c.AddElements(t0+3*horizon.Milliseconds(), "a")) // forgotten: passes
			step(c.AdvanceWatermarkToInfinity())

			p, s := beam.NewPipelineWithRoot()
			msgs := beam.ParDo(s, withIDAttribute, teststream.Create(s, c))
			out := Deduplicate(s, Config{IDAttribute: "id", Horizon: horizon, TimeDomain: domain}, msgs)
			passert.Equals(s, beam.ParDo(s, idOf, out), "a", "b", "a")
			if err := ptest.Run(p); err != nil {
				t.Fatalf("pipeline failed: %v", err)
			}
		})
	}
}

// A bad configuration is refused when the pipeline is built.
func TestDeduplicateRejects(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{IDAttribute: "goog-id"}, `IDAttribute "goog-id" starts with "goog"`},
		{Config{IDAttribute: " "}, "IDAttribute \" \" is blank"},
		{Config{Horizon: time.Millisecond}, "Horizon 1ms must be between 1s and 744h0m0s"},
		{Config{TimeDomain: "WALL"}, `TimeDomain "WALL" is unknown`},
		{Config{Missing: "DROP"}, `Missing "DROP" is unknown`},
	}
	for _, c := range cases {
		_, s := beam.NewPipelineWithRoot()
		_, err := TryDeduplicate(s, c.cfg, beam.Create(s, model.Message{ID: "1"}))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "pubsubio.Deduplicate: ") {
			t.Errorf("%+v: %v; want an error containing %q", c.cfg, err, c.want)
		}
	}
	_, s := beam.NewPipelineWithRoot()
	if _, err := TryDeduplicate(s, Config{}, beam.Create(s, "x")); err == nil || !strings.Contains(err.Error(), "not PCollection<pubsubio.Message>") {
		t.Errorf("a PCollection<string>: %v; want it refused", err)
	}
}
