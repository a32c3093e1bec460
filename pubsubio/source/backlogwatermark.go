package source

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// The backlog's hold on the watermark (watermark.go has the rules). A
// subscription whose oldest unacked message is old is not caught up,
// whatever its arrivals say: after a stall (an outage, the budget, a
// restart on a backlog) Pub/Sub may deliver newer messages first, and the
// arrivals' lag would move the watermark past older ones still waiting. A
// sample says when the oldest unacked message was published, as of a
// minute or few ago; what it held then has been published at that time or
// later, so holding the watermark there never runs it ahead. Because the
// sample is stale, the hold is kept to where it can only help:
//
//   - only for a message at least WatermarkWindow old when sampled: a
//     caught-up read's oldest unacked message is one it emitted moments
//     before and acks at the next commit, and holding at it would drag the
//     watermark minutes behind the clock, one sample after another;
//   - only while the split's own estimate has not passed it: behind the
//     watermark, a hold would only stop it, and what it reveals there is
//     late already;
//   - only from a sample younger than WatermarkMaxOutage, and on one
//     message for at most WatermarkMaxOutage (counted and logged): a
//     message Pub/Sub redelivers forever, or Monitoring gone silent, must
//     not stall the pipeline;
//   - only when event times are publish times: the sample knows nothing of
//     a TimestampAttribute.
//
// So that a read started on a backlog holds from its first bundle, a
// split's estimate waits for its subscription's first answer from
// Monitoring, for at most WatermarkIdle.

// backlogHold is the hold of a subscription's oldest unacked message on
// its splits' watermark.
type backlogHold struct {
	at       time.Time // the held message's publish time
	since    time.Time // when it began to hold
	released bool      // it held for WatermarkMaxOutage
}

// backlogHoldLocked applies the backlog's hold to c, the split's watermark
// candidate at now (zero: none): c, or the publish time of the oldest
// unacked message if that is earlier and holds, or zero while the split
// waits for its subscription's first sample.
func (r *splitReader) backlogHoldLocked(c, now time.Time) time.Time {
	if r.backlog == nil || c.IsZero() || r.cfg.TimestampAttribute != "" {
		return c
	}
	return r.backlog.hold(c, r.watermark, now, r.cfg.watermarkPolicy(), r.cfg.WatermarkMaxOutage)
}

// hold is backlogHoldLocked for the watched subscription; prev is the
// split's own last estimate.
func (w *backlogWatch) hold(c, prev, now time.Time, p watermarkPolicy, maxOutage time.Duration) time.Time {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.subs[w.sub]
	if e == nil {
		return c
	}
	if !e.done && now.Sub(e.watched) < p.Idle {
		return time.Time{}
	}
	oldest, ok := e.sample.OldestPublished()
	if !ok || e.sample.OldestAge.At.Sub(oldest) < p.Window || now.Sub(e.sample.OldestAge.At) >= maxOutage ||
		oldest.Before(prev) || !oldest.Before(c) {
		return c
	}
	h := &e.hold
	if !h.at.Equal(oldest) {
		*h = backlogHold{at: oldest, since: now}
		watermarkBacklogHolds.Add(1)
	}
	if now.Sub(h.since) < maxOutage {
		return oldest
	}
	if !h.released {
		h.released = true
		watermarkBacklogHoldsReleased.Add(1)
		log.Warnf(context.Background(), "pubsubio.Read: the oldest unacked message of %s, published %s as Cloud Monitoring last saw it, has held the watermark for WatermarkMaxOutage %v; the watermark goes past it, and if it still arrives it is late (late_messages, LatePolicy)",
			w.sub, oldest.UTC().Format(time.RFC3339), maxOutage)
	}
	return c
}
