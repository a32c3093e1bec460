package sink

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// With batching thresholds nothing reaches, only FinishBundle's flush sends
// anything, and it returns with everything confirmed, bundle after bundle.
func TestFinishBundleFlushesAndDrainsEverything(t *testing.T) {
	h := newHarness(t, Config{Publisher: PublisherOptions{CountThreshold: 1000}}, nil)
	for round := range 3 {
		h.w.startBundle()
		for i := range 50 {
			h.mustProcess(msg(fmt.Sprintf("r%d-%d", round, i), topicN(i%2)))
		}
		if n := len(h.be.delivered(topicN(0))) + len(h.be.delivered(topicN(1))); n != round*50 {
			t.Fatalf("round %d: %d delivered before the flush, want %d", round, n, round*50)
		}
		if h.w.inflightMsgs != 50 {
			t.Fatalf("round %d: %d in flight before FinishBundle, want 50", round, h.w.inflightMsgs)
		}
		h.mustFinish()
		if h.w.inflightMsgs != 0 || h.w.inflightBytes != 0 {
			t.Fatalf("round %d: FinishBundle returned with %d messages / %d bytes in flight", round, h.w.inflightMsgs, h.w.inflightBytes)
		}
	}
	if n := len(h.be.delivered(topicN(0))) + len(h.be.delivered(topicN(1))); n != 150 || h.w.stats.records.Load() != 150 {
		t.Errorf("delivered %d, counted %d; want 150", n, h.w.stats.records.Load())
	}
}

func TestProgressTimeoutFailsAndWarns(t *testing.T) {
	h := capHarness(t, Config{PublishProgressTimeout: 500 * time.Millisecond, Publisher: PublisherOptions{Timeout: 500 * time.Millisecond}})
	h.mustProcess(msg("a"))
	err := h.finish()
	for _, want := range []string{"PublishProgressTimeout 500ms", "none of 1 outstanding", "flushing at the end of the bundle"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("FinishBundle error %v does not mention %q", err, want)
		}
	}
	w := h.warnings()
	if len(w) == 0 || !strings.Contains(w[0], "Pub/Sub has answered none of 1 outstanding publishes") {
		t.Errorf("warnings %q, want the stall named", w)
	}
	if len(w) > 10 {
		t.Errorf("%d warnings in one budget, want at most one per tenth", len(w))
	}
}

// The budget bounds a stall, not a slow topic: it restarts at every
// completion, so a wait longer than the budget in total succeeds while
// verdicts keep arriving.
func TestProgressBudgetRestartsAtEveryCompletion(t *testing.T) {
	be := newFakeBackend(1)
	be.hold = true
	h := newHarness(t, Config{PublishProgressTimeout: 2 * time.Second, Publisher: PublisherOptions{CountThreshold: 1, Timeout: 2 * time.Second}}, be)
	for i := range 8 {
		h.mustProcess(msg(fmt.Sprint(i)))
	}
	p := be.publishers(validTopic)[0]
	go func() {
		for p.release(1) == 1 { // pacing a slow topic, not synchronizing
			time.Sleep(400 * time.Millisecond)
		}
	}()
	start := time.Now()
	h.mustFinish()
	if took := time.Since(start); took < 2*time.Second {
		t.Logf("the drain took %v, less than the budget; the test proves nothing on this run", took)
	}
}
