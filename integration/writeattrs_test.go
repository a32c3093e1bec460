package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

func init() {
	register.DoFn2x0[int, func(beam.EventTime, pubsubio.Message)](&atSecondFn{})
	register.Emitter2[beam.EventTime, pubsubio.Message]()
	register.Function2x1(payloadAtEventTime)
	register.Function1x1(elementIDOf)
}

// atSecondFn emits element i as a message at BaseMillis + i seconds.
// BaseMillis, the event time of element 0, is recent on purpose: the
// read's watermark follows the clock when its subscription is idle, and
// Deduplicate in event time forgets a key once the watermark passes its
// event time plus the horizon.
type atSecondFn struct {
	BaseMillis int64
}

func (fn *atSecondFn) ProcessElement(i int, emit func(beam.EventTime, pubsubio.Message)) {
	emit(mtime.FromMilliseconds(fn.BaseMillis+int64(i)*1000), pubsubio.Message{Data: []byte(strconv.Itoa(i))})
}

// payloadAtEventTime says what a message holds and when it happened.
func payloadAtEventTime(et beam.EventTime, m pubsubio.Message) string {
	return fmt.Sprintf("%s@%d", m.Data, et.Milliseconds())
}

func elementIDOf(m pubsubio.Message) string { return m.Attributes["element_id"] }

// Write -> Read: Write sets each element's event time and an ID derived
// from it; a read with TimestampAttribute emits every message at the event
// time it was written with, and Deduplicate keyed on the ID removes what a
// second, identical run of the writer (a retried bundle) published again.
func TestWriteAttributesRoundTrip(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	topic := e.CreateTopic(t, "write-attrs")
	sub := e.CreateSubscription(t, topic, "write-attrs", 0)
	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	base := time.Now().Truncate(time.Second)
	const n = 50
	elements := make([]int, n)
	for i := range elements {
		elements[i] = i
	}
	for run := 1; run <= 2; run++ {
		p, s := beam.NewPipelineWithRoot()
		msgs := beam.ParDo(s, &atSecondFn{BaseMillis: base.UnixMilli()}, beam.CreateList(s, elements))
		pubsubio.Write(s, pubsubio.WriteConfig{Topic: topic, TimestampAttribute: "event_ms", IDAttribute: "element_id", Connection: conn}, msgs)
		if err := beamx.Run(context.Background(), p); err != nil {
			t.Fatalf("write run %d failed: %v", run, err)
		}
	}

	p, s := beam.NewPipelineWithRoot()
	// Ended by idleness, not by MaxMessages: the end of a bounded read
	// moves the watermark to the end of time, which fires every key's
	// event-time timer in Deduplicate. Ended on its count, the read once
	// let 2 of 50 keys through twice in CI, most likely copies emitted by
	// its last bundles that reached Deduplicate with their keys' timers.
	// Idle, the read ends seconds after Deduplicate has seen every copy.
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions:      []pubsubio.Subscription{sub},
		TimestampAttribute: "event_ms",
		IdleTimeout:        5 * time.Second,
		Connection:         conn,
	})
	ids, once := collect.Bucket(t), collect.Bucket(t)
	collect.Into(s, ids, beam.ParDo(s, elementIDOf, msgs))
	deduped := pubsubio.Deduplicate(s, pubsubio.DedupConfig{IDAttribute: "element_id", TimeDomain: pubsubio.DedupEventTime}, msgs)
	collect.Into(s, once, beam.ParDo(s, payloadAtEventTime, deduped))
	ctx, cancel := runContext(3 * time.Minute)
	defer cancel()
	if err := beamx.Run(ctx, p); err != nil {
		t.Fatalf("read failed: %v", err)
	}

	copies := tally(t, ids)
	if len(copies) != n {
		t.Errorf("the read saw %d distinct element IDs, want %d (one per element): %v", len(copies), n, collect.Sample(ids, 5))
	}
	for id, c := range copies {
		if c != 2 || len(id) != 32 {
			t.Errorf("element ID %q on %d messages; want 32 hex digits on 2 (one per write run)", id, c)
		}
	}
	got := tally(t, once)
	for i := range n {
		want := fmt.Sprintf("%d@%d", i, base.Add(time.Duration(i)*time.Second).UnixMilli())
		if got[want] != 1 {
			t.Errorf("%s emitted %d times after Deduplicate, want once", want, got[want])
		}
	}
	if len(got) != n {
		t.Errorf("after Deduplicate: %d distinct outputs, want %d: %v", len(got), n, collect.Sample(once, 5))
	}
}
