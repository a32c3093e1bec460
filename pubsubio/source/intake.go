package source

import (
	"context"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The intake is the client's callback: it turns what the client received
// into a delivery and buffers it for the split's next bundle. It never
// emits and never acks; it blocks the client only while the buffer budget
// is full.

// fromClient is the delivery of m, a message the client received for
// split sub.
func fromClient(m *pubsub.Message, sub model.Subscription, cfg *Config) *delivery {
	msg := model.Message{
		ID:           m.ID,
		Data:         m.Data,
		Attributes:   m.Attributes,
		OrderingKey:  m.OrderingKey,
		PublishTime:  m.PublishTime,
		Subscription: sub,
	}
	if m.DeliveryAttempt != nil {
		msg.DeliveryAttempt = *m.DeliveryAttempt
	}
	return newDelivery(msg, m, ackIDOf(m), cfg)
}

// newDelivery is a received copy of msg, acked or nacked through h.
func newDelivery(msg model.Message, h handle, id ackID, cfg *Config) *delivery {
	var span trace.Span
	if cfg.Tracing {
		msg, span = tracing.StartReceive(msg)
	}
	size := int64(len(msg.Data) + len(msg.OrderingKey))
	for k, v := range msg.Attributes {
		size += int64(len(k) + len(v))
	}
	return &delivery{msg: msg, handle: h, ackID: id, size: size, decoded: decode(cfg, msg), span: span}
}

// deliver buffers d, received by run. If the budget is full it waits up to
// budgetWait for a bundle to make room (holding the client back), and if
// none came it is over budget (overBudgetLocked), as it is when it has to
// wait behind what is withheld. It reports whether the split took d; what
// it did not take is given back with the RPC once the subscriber stopped
// (puller.receive).
func (r *splitReader) deliver(run *receiveRun, d *delivery) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running != run {
		return r.refuseLocked(d)
	}
	r.countDelivery(d)
	r.ledger.supersede(d.msg.ID)
	// Unless it is a withheld message coming back, into the room reserved
	// for it, a delivery waits behind what is withheld (withheld.go).
	back := r.ledger.comingBack(d.msg.ID)
	waitsBehind := !back && r.ledger.mustWithhold(d, r.cfg.Ordering == OrderingPerKey)
	if waitsBehind || !back && !r.budget.reserve(d.size) && !r.awaitRoomLocked(run, d.size) {
		if r.running != run {
			return r.refuseLocked(d)
		}
		return r.overBudgetLocked(d)
	}
	d.arrived = r.now()
	r.ledger.hold(d)
	r.lastArrival, r.lastListening = d.arrived, d.arrived
	r.lags.add(d.arrived, r.lagOf(d))
	return true
}

// lagOf is the lag d's arrival adds to the watermark's estimate: its
// arrival minus its event time, but none for a message stamped ahead of
// the clock (it must not move the watermark past the clock), and no more
// than the split's watermark had trailed its arrival for a late one: that
// holds the watermark back by at most WatermarkLateness, so that a gradual
// rise of the lag stops making messages late, while one message at Beam's
// minimum timestamp does not stall the windows for WatermarkWindow.
func (r *splitReader) lagOf(d *delivery) time.Duration {
	lag := max(d.arrived.Sub(d.eventTime), 0)
	if !r.watermark.IsZero() {
		lag = min(lag, max(d.arrived.Sub(r.watermark), 0))
	}
	return lag
}

// overBudgetLocked takes d, which found the budget full and got no room,
// or has to wait behind what is withheld: it is withheld (withheld.go).
// What is buffered stays for the next bundle, so the read progresses while
// the budget holds one message. Without the client's flow control only
// this bounds what is withheld: past BufferMaxMessages withheld, the
// subscriber is stopped instead and gives back all it holds until it is
// polled again.
func (r *splitReader) overBudgetLocked(d *delivery) bool {
	if !r.cfg.flowControlled() && len(r.ledger.withheld) >= r.cfg.BufferMaxMessages {
		// Not nacked here: it is not taken, so once the stop below ends the
		// subscriber it is given back with the RPC, with what the client
		// pulled and never delivered (pulled.go).
		r.stats.add(nackedBudget, 1)
		r.ledger.givenBack.add(d.msg.ID, d.msg.Subscription, d.eventTime, r.now())
		log.Warnf(context.Background(), "pubsubio.Read: buffer budget of %d messages / %d bytes full and %d deliveries withheld with MaxOutstandingMessages %d (no flow control); stopping the subscriber of %s and giving back all it holds until it is polled again (raise BufferMaxMessages/BufferMaxBytes, or set MaxOutstandingMessages)",
			r.cfg.BufferMaxMessages, r.cfg.BufferMaxBytes, len(r.ledger.withheld), r.cfg.MaxOutstandingMessages, r.split.Subscription)
		r.stopLocked(nackedBudget)
		return false
	}
	if len(r.ledger.withheld) == 0 && len(r.ledger.returned) == 0 {
		log.Warnf(context.Background(), "pubsubio.Read: buffer budget of %d messages / %d bytes full (%d buffered for the next bundle of %s, %d deliveries waiting up to %v for room); holding later deliveries without their payload until a bundle makes room, then giving them back for redelivery (raise BufferMaxMessages/BufferMaxBytes)",
			r.cfg.BufferMaxMessages, r.cfg.BufferMaxBytes, r.ledger.buffered, r.split.Subscription, r.waiting, r.budgetWait)
	}
	d.msg.Data, d.msg.Attributes = nil, nil
	if m, ok := d.handle.(*pubsub.Message); ok {
		m.Data, m.Attributes = nil, nil
	}
	r.ledger.withhold(d)
	return true
}

// refuseLocked nacks d, which arrived for a subscriber that is stopping.
func (r *splitReader) refuseLocked(d *delivery) bool {
	d.handle.Nack()
	traceGivenBack(d, nackedShutdown)
	r.stats.add(nackedShutdown, 1)
	r.ledger.givenBack.add(d.msg.ID, d.msg.Subscription, d.eventTime, r.now())
	return false
}

// awaitRoomLocked waits, without the lock, up to budgetWait for room in
// the full budget (see budgetWait) and reports whether it reserved size.
// Meanwhile the split counts as listening, not idle (state). It reports
// false, holding nothing, if run stopped meanwhile.
func (r *splitReader) awaitRoomLocked(run *receiveRun, size int64) bool {
	r.waiting++
	wait := r.budgetWait
	r.mu.Unlock()
	ok := r.budget.reserveWithin(run.ctx, size, wait)
	r.mu.Lock()
	r.waiting--
	if ok && r.running != run {
		r.budget.free(1, size)
		return false
	}
	return ok
}

// Delivery attempts. Pub/Sub counts one for every delivery of a message:
// the first, and each redelivery after a nack or a lapsed lease. A
// subscription with a dead-letter policy forwards a message once it used
// up MaxDeliveryAttempts, whether or not it ever failed. The read spends
// them only where it must (docs/delivery.md, Delivery guarantee): flow control sized
// from the budget (budget.go), no release while a bundle runs
// (splitreader.go), a failed bundle's healthy messages kept for its retry
// (requeue.go). What it still spends is counted here, and the prepare step
// warns about a dead-letter policy that leaves little room for it.

// countDelivery counts d, just received, in delivery_attempts (when
// Pub/Sub reports its attempt: only with a dead-letter policy) and in
// messages_redelivered when it is a redelivery: Pub/Sub says so, or the
// split still holds the message, or the read gave it back within
// WatermarkWindow (givenback.go).
func (r *splitReader) countDelivery(d *delivery) {
	n := d.msg.DeliveryAttempt
	if n > 0 {
		r.stats.attempts.Add(int64(n))
	}
	if n > 1 || r.ledger.held[d.msg.ID] != nil || r.ledger.givenBack.has(d.msg.ID) {
		r.stats.add(messagesRedelivered, 1)
	}
}
