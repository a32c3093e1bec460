package sink

import (
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Invalid configuration and input are rejected at graph construction:
// TryWrite returns the error, Write panics with it.
func TestTryWriteRejectsAtConstruction(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s, model.Message{Data: []byte("a")})
	if _, err := TryWrite(s, Config{Topic: validTopic, MaxInFlightMessages: -3}, msgs); err == nil || !strings.Contains(err.Error(), "MaxInFlightMessages -3") {
		t.Errorf("TryWrite with a negative cap: %v", err)
	}
	strs := beam.Create(s, "a", "b")
	if _, err := TryWrite(s, Config{Topic: validTopic}, strs); err == nil || !strings.Contains(err.Error(), "PCollection<string>") || !strings.Contains(err.Error(), "MessagesFromStrings") {
		t.Errorf("TryWrite on PCollection<string>: %v", err)
	}
	out, err := TryWrite(s, Config{Topic: validTopic}, MessagesFromStrings(s, strs))
	if err != nil {
		t.Fatalf("TryWrite on converted strings: %v", err)
	}
	if got := out.Type().Type().Name(); got != "FailedMessage" {
		t.Errorf("Write returns PCollection<%s>, want the dead letters", got)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), `FailurePolicy "LATER"`) {
			t.Errorf("Write with an unknown policy: recovered %v, want a panic naming the option", r)
		}
	}()
	Write(s, Config{Topic: validTopic, FailurePolicy: "LATER"}, msgs)
}

// -1 removes the bound on consecutive rejections.
func TestUnboundedConsecutiveRejections(t *testing.T) {
	h := newHarness(t, Config{FailurePolicy: model.PolicyDrop, MaxConsecutiveRejections: -1}, nil)
	for range 300 {
		h.mustProcess(model.Message{}) // empty: rejected before sending
	}
	h.mustFinish()
	if h.w.stats.dropped.Load() != 300 {
		t.Errorf("dropped %d, want 300", h.w.stats.dropped.Load())
	}
}

func TestPerDestinationMetricsOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := newHarness(t, Config{PerDestinationMetrics: on}, nil)
		h.mustProcess(msg("abc", topicN(0)))
		h.mustProcess(msg("de", topicN(1)))
		h.mustProcess(msg("f", topicN(1)))
		h.mustFinish()
		records := func(i int) int64 { return h.w.stats.byName.Load("records_sent." + topicN(i).String()) }
		bytes := func(i int) int64 { return h.w.stats.byName.Load("bytes_sent." + topicN(i).String()) }
		if !on {
			if records(0)+records(1)+bytes(0)+bytes(1) != 0 {
				t.Errorf("per-destination counts kept while PerDestinationMetrics is off")
			}
			continue
		}
		if records(1) != 2 || bytes(1) != 3 || records(0) != 1 || bytes(0) != 3 {
			t.Errorf("per destination: %d records, %d bytes to %s and %d, %d to %s; want 2, 3 and 1, 3",
				records(1), bytes(1), topicN(1), records(0), bytes(0), topicN(0))
		}
	}
}
