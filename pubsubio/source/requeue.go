package source

import (
	"cmp"
	"slices"
)

// Requeueing: what a bundle emitted goes back into the split's buffer,
// still leased, when the runner discards the bundle's output (the bundle
// failed, or the runner retries it). The retry emits it again without a
// redelivery, so Pub/Sub counts no delivery attempt against a message that
// did not fail: a subscription's dead-letter policy then forwards only
// messages that failed themselves (RELIABILITY.md, delivery attempts). What
// a runner never retries (Prism fails the job) stays leased until the split
// is released after LeaseIdle, and goes back to Pub/Sub then.

// requeueFrom takes back what bundles seq and later emitted and did not
// ack, and puts it at the front of the buffer in arrival order. failed, the
// delivery whose processing failed (nil if none is known), is given back
// instead, and so is what finds no room in the budget, and, under
// OrderingPerKey (perKey), everything: there, a message kept would
// overtake the redelivery of an earlier one of its key. It returns the ack
// IDs given back, for the RPC.
func (l *ledger) requeueFrom(seq int64, failed *delivery, perKey bool) []string {
	var back []*delivery
	for _, d := range l.pending {
		if d.seq >= seq {
			back = append(back, d)
		}
	}
	slices.SortFunc(back, func(a, b *delivery) int { return cmp.Compare(a.n, b.n) })
	var nacks []ackID
	kept := make([]*delivery, 0, len(back))
	for _, d := range back {
		if d == failed || perKey || !l.budget.reserve(d.size) {
			l.end(d, nackIt, nackedUncommitted)
			nacks = append(nacks, d.ackID)
			continue
		}
		delete(l.pending, d.ackID)
		l.stats.pendingAcks.Add(-1)
		d.state = buffered
		l.buffered++
		kept = append(kept, d)
	}
	l.stats.add(messagesRequeued, len(kept))
	l.buffer = append(kept, l.buffer...)
	return remoteAckIDs(nacks)
}
