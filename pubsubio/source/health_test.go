package source

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// outageHarness is a listening split whose stream has just failed, with
// its subscription answering describes with describeErr.
func outageHarness(t *testing.T, describeErr error) *readerHarness {
	cfg := testConfig(t, func(c *Config) { c.WatermarkMaxOutage = time.Minute })
	h := newReaderHarness(t, cfg)
	h.poll()
	h.conn.mu.Lock()
	h.conn.describeErr = describeErr
	h.conn.mu.Unlock()
	h.conn.health().failed(status.Error(codes.Unavailable, "connection refused"), h.clock.now())
	return h
}

// endBundle ends a bundle and waits for the describe probe it may start.
func (h *readerHarness) endBundleAndProbe() splitState {
	s := state(h.r)
	awaitCondition(h.t, "the describe probe ends", func() bool {
		h.r.mu.Lock()
		defer h.r.mu.Unlock()
		return !h.r.probing
	})
	return s
}

func (f *fakePuller) describeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.describes
}

// While the client silently retries a broken stream, the split must not
// look idle: its watermark holds (a describe probe each WatermarkIdle
// confirms the outage), and moves on only after WatermarkMaxOutage,
// counted.
func TestWatermarkHoldsWhileTheStreamFails(t *testing.T) {
	h := outageHarness(t, status.Error(codes.Unavailable, "unreachable"))
	cfg := h.r.cfg
	for range 5 {
		h.clock.advance(cfg.WatermarkIdle)
		if s := h.endBundleAndProbe(); s.listening {
			t.Fatal("a split whose stream fails counts as listening")
		}
		if w := watermarkOf(h.r); !w.IsZero() {
			t.Fatalf("the watermark moved to %v during the outage", w)
		}
	}
	if n := h.conn.describeCount(); n != 5 {
		t.Errorf("%d describe probes over 5 x WatermarkIdle, want 5", n)
	}
	h.clock.advance(cfg.WatermarkMaxOutage)
	h.endBundleAndProbe()
	h.clock.advance(cfg.WatermarkIdle)
	h.endBundleAndProbe()
	if got, want := watermarkOf(h.r), h.clock.now().Add(-cfg.WatermarkLateness); !got.Equal(want) {
		t.Errorf("past WatermarkMaxOutage: watermark %v, want it idle again, %v", got, want)
	}
	h.checkCount("watermark_outages", watermarkOutages, 1)
	h.checkCount("watermark_outages_released", watermarkOutagesReleased, 1)
}

// A stream that failed once (a reconnect) on a quiet subscription holds
// the watermark only until its subscription answers a describe.
func TestWatermarkResumesWhenTheSubscriptionAnswers(t *testing.T) {
	h := outageHarness(t, nil)
	h.endBundleAndProbe() // the probe answers
	if _, _, failing := h.conn.health().failure(); failing {
		t.Fatal("the stream still counts as failing after its subscription answered")
	}
	h.clock.advance(h.r.cfg.WatermarkIdle)
	h.endBundleAndProbe()
	if got, want := watermarkOf(h.r), h.clock.now().Add(-h.r.cfg.WatermarkLateness); !got.Equal(want) {
		t.Errorf("watermark %v, want the idle split's %v", got, want)
	}
	h.checkCount("watermark_outages_released", watermarkOutagesReleased, 0)
}

// A stream the split cancelled, or one the server ended cleanly, is not a
// failure.
func TestStreamHealthIgnoresCancelAndEOF(t *testing.T) {
	var h streamHealth
	for _, err := range []error{io.EOF, context.Canceled, status.Error(codes.Canceled, "stopped")} {
		h.failed(err, time.Now())
		if _, _, failing := h.failure(); failing {
			t.Errorf("%v counted as a failure", err)
		}
	}
	h.failed(status.Error(codes.Unavailable, "down"), time.Now())
	if _, err, failing := h.failure(); !failing || status.Code(err) != codes.Unavailable {
		t.Errorf("Unavailable: failing %v, error %v", failing, err)
	}
}
