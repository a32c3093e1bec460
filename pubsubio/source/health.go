package source

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A split's stream health, for the watermark. The client retries a broken
// streaming pull (an unreachable endpoint, a revoked permission it takes
// for a passing fault) without a word, so a split whose stream fails looks
// like a quiet one, and an idle split's watermark runs on with the clock:
// everything published during the outage would arrive late. So the
// connection's interceptor records stream failures (pulled.go), and a split
// whose stream failed does not listen (bundle.go) until a response arrives
// or its subscription answers a describe, probed at most once per
// WatermarkIdle. Past WatermarkMaxOutage it listens again anyway, counted
// and logged: what arrives later behind the watermark is late (LatePolicy).

// streamHealth is what a split's streaming pulls last reported. Safe for
// concurrent use.
type streamHealth struct {
	mu      sync.Mutex
	failing bool
	since   time.Time // the first failure since the stream last answered
	err     error
}

// failed records a stream failure at now. A cancelled stream (the split
// stopping it) and one the server ended cleanly are not failures.
func (h *streamHealth) failed(err error, now time.Time) {
	if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		h.failing, h.since = true, now
	}
	h.err = err
}

// answered records a response, or a describe that succeeded.
func (h *streamHealth) answered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing, h.err = false, nil
}

// failure returns when the current failure began and its latest error, or
// ok false if the stream has not failed since it last answered.
func (h *streamHealth) failure() (since time.Time, err error, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since, h.err, h.failing
}

// outageLocked reports whether the split's stream is failing and has been
// for less than WatermarkMaxOutage. It starts a describe probe when none
// ran within WatermarkIdle, and counts and logs each outage once.
func (r *splitReader) outageLocked(now time.Time) bool {
	if r.conn == nil {
		return false
	}
	since, err, failing := r.conn.health().failure()
	if !failing {
		r.outage = time.Time{}
		return false
	}
	if !r.outage.Equal(since) {
		r.outage, r.outageReleased = since, false
		r.stats.add(watermarkOutages, 1)
		log.Warnf(context.Background(), "pubsubio.Read: the streaming pull of %s is failing (%v); the watermark holds until it answers again, for at most WatermarkMaxOutage %v", r.split.Subscription, err, r.cfg.WatermarkMaxOutage)
	}
	if now.Sub(since) >= r.cfg.WatermarkMaxOutage {
		if !r.outageReleased {
			r.outageReleased = true
			r.stats.add(watermarkOutagesReleased, 1)
			log.Warnf(context.Background(), "pubsubio.Read: the streaming pull of %s has failed for over WatermarkMaxOutage %v (%v); the watermark advances again, and what was published meanwhile may arrive late (late_messages, LatePolicy)", r.split.Subscription, r.cfg.WatermarkMaxOutage, err)
		}
		return false
	}
	if !r.probing && now.Sub(r.lastProbe) >= r.cfg.WatermarkIdle {
		r.probing, r.lastProbe = true, now
		go r.probe(r.conn)
	}
	return true
}

// probe describes the split's subscription, under Connection.RPCTimeout;
// if it answers, the stream counts as healthy again (the client reconnects
// it on its own).
func (r *splitReader) probe(conn puller) {
	if conn.describe(context.Background()) == nil {
		conn.health().answered()
	}
	r.mu.Lock()
	r.probing = false
	r.mu.Unlock()
}
