package source

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
