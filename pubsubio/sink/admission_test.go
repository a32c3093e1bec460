package sink

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// capHarness holds every sent batch, so in-flight messages stay in flight
// until the test releases them.
func capHarness(t *testing.T, cfg Config) *harness {
	be := newFakeBackend(1000)
	be.hold = true
	return newHarness(t, cfg, be)
}

// blocked starts process(m), checks it blocks at a cap (the writer flushes
// first, and nothing is released), and returns the pending result.
func (h *harness) blocked(m model.Message) <-chan error {
	h.t.Helper()
	done := async(func() error { return h.process(m) })
	h.be.waitEvent(h.t, "flush ")
	select {
	case err := <-done:
		h.t.Fatalf("process(%q) did not block at the cap (err %v)", m.Data, err)
	default:
	}
	return done
}

func TestMessageCapBlocksUntilACompletion(t *testing.T) {
	h := capHarness(t, Config{MaxInFlightMessages: 3})
	for i := range 3 {
		h.mustProcess(msg(fmt.Sprint(i)))
	}
	done := h.blocked(msg("3"))
	h.be.publishers(validTopic)[0].setHold(false)
	if err := within(t, done, "the blocked process"); err != nil {
		t.Fatal(err)
	}
	h.mustFinish()
	if h.w.stats.records.Load() != 4 {
		t.Errorf("records %d, want 4", h.w.stats.records.Load())
	}
}

func TestByteCapBlocksFarBelowTheMessageCap(t *testing.T) {
	h := capHarness(t, Config{MaxInFlightBytes: 1000})
	payload := strings.Repeat("x", 300) // 303 bytes serialized
	for range 3 {
		h.mustProcess(msg(payload))
	}
	done := h.blocked(msg(payload))
	if h.w.inflightMsgs != 3 || h.w.cfg.MaxInFlightMessages != DefaultMaxInFlightMessages {
		t.Fatalf("blocked with %d messages in flight against a message cap of %d", h.w.inflightMsgs, h.w.cfg.MaxInFlightMessages)
	}
	h.be.publishers(validTopic)[0].setHold(false)
	if err := within(t, done, "the blocked process"); err != nil {
		t.Fatal(err)
	}
	h.mustFinish()
}

// A message larger than the byte cap is admitted when nothing is in flight,
// never deadlocking; while it is in flight the next one waits.
func TestOversizedMessageAdmittedWhenNothingInFlight(t *testing.T) {
	h := capHarness(t, Config{MaxInFlightBytes: 100})
	h.mustProcess(msg(strings.Repeat("x", 5000)))
	if h.w.inflightBytes <= 100 {
		t.Fatalf("in-flight bytes %d, want the oversized message counted", h.w.inflightBytes)
	}
	done := h.blocked(msg("small"))
	h.be.publishers(validTopic)[0].setHold(false)
	if err := within(t, done, "the blocked process"); err != nil {
		t.Fatal(err)
	}
	h.mustFinish()
}

// A message without payload still counts as in flight, so FinishBundle
// waits for its confirmation.
func TestZeroBytePayloadCountsInFlight(t *testing.T) {
	h := capHarness(t, Config{})
	h.mustProcess(model.Message{Attributes: map[string]string{"kind": "marker"}})
	if h.w.inflightMsgs != 1 {
		t.Fatalf("in flight %d, want 1", h.w.inflightMsgs)
	}
	done := async(h.finish)
	h.be.waitEvent(t, "flush ")
	select {
	case err := <-done:
		t.Fatalf("FinishBundle returned (%v) before the zero-byte message was confirmed", err)
	default:
	}
	h.be.publishers(validTopic)[0].setHold(false)
	if err := within(t, done, "FinishBundle"); err != nil {
		t.Fatal(err)
	}
	if h.w.stats.records.Load() != 1 || h.w.stats.bytes.Load() != 0 {
		t.Errorf("records %d bytes %d, want 1 and 0", h.w.stats.records.Load(), h.w.stats.bytes.Load())
	}
}
