package source

import (
	"context"
	"time"
)

// The bundle protocol: what one bundle of a split asks of its reader. A
// bundle calls beginBundle, emits what it got, then calls endBundle; if it
// fails after beginBundle, abandonBundle gives back what it emitted. Each
// step takes the reader's lock once.

// beginBundle takes back what an earlier attempt of this bundle emitted (a
// retry), acks what the bundles before rest emitted as far as the runner
// has made it durable (internal/commit), makes sure the subscriber runs, and
// returns up to limit buffered deliveries for the bundle to emit. For a
// final restriction it only takes back and acks.
func (r *splitReader) beginBundle(ctx context.Context, rest Restriction, limit int) ([]*delivery, error) {
	r.mu.Lock()
	now := r.now()
	r.lastPolled = now
	// Anything this split emitted under this bundle's number or later is
	// output the runner discarded: this bundle is a retry, which emits it
	// again (requeue.go). Taken back before anything is acked.
	r.ledger.requeueFrom(rest.Seq, nil, r.cfg.Ordering == OrderingPerKey)
	c, err := r.gate.Begin(rest.Seq, emittedBefore(rest))
	remote := r.carryOut(c, r.gateAcks)
	r.mu.Unlock()
	// Emitted by another process: only the RPC can ack them, and it is a
	// network call, made without the lock.
	r.ackRemote(ctx, remote)
	if err != nil {
		return nil, errCannotAck(r, err)
	}
	if rest.Final {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.startLocked(ctx); err != nil {
		return nil, err
	}
	r.inBundle = true
	return r.ledger.drain(limit, rest.Seq, now), nil
}

// endBundle nacks what the bundle could not decode under DecodeNack, sets
// the split's own watermark under policy, and returns the split's state.
func (r *splitReader) endBundle(nacks []*delivery, policy watermarkPolicy) splitState {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bundleEndedLocked()
	for _, d := range nacks {
		// At once, through its subscriber, so that Pub/Sub counts the
		// delivery attempt and redelivers it (or forwards it to the
		// subscription's dead-letter topic) without waiting for a deadline.
		r.ledger.end(d, nackIt, nackedDecode)
	}
	s := r.stateLocked()
	if s.listening {
		r.lastListening = s.at
	} else {
		r.lastDeaf = s.at
	}
	if c := r.backlogHoldLocked(policy.next(s), s.at); !c.IsZero() {
		if back := r.ledger.givenBack.oldest(s.at); !back.IsZero() && back.Before(c) {
			c = back
		}
		// Not kept monotone here (the estimator is): after a failed bundle
		// the runner resumes from the estimate before it, and what that
		// bundle gave back must hold the next.
		r.watermark = c
	}
	return s
}

func (r *splitReader) stateLocked() splitState {
	now := r.now()
	s := splitState{
		at:             now,
		buffered:       r.ledger.buffered,
		withheld:       len(r.ledger.withheld),
		listenedAt:     r.lastListening,
		listeningSince: later(r.lastArrival, r.lastDeaf),
		oldestBuffered: r.ledger.oldestBuffered(),
	}
	s.listening = r.running != nil && r.waiting == 0 && s.withheld == 0 && !r.throttledLocked() && !r.outageLocked(now)
	s.maxLag, s.hasLag = r.lags.largest(now)
	if s.listening {
		s.listenedAt = now
	} else {
		// Without this, a bundle that stalled downstream past IdleTimeout
		// would end a bounded read with the backlog the budget gave back, or
		// held back, unread.
		s.listeningSince = now
	}
	return s
}

// throttledLocked reports whether the split holds as many messages as its
// streams' flow control lets Pub/Sub send: the server waits for acks then.
func (r *splitReader) throttledLocked() bool {
	limit := r.cfg.MaxOutstandingMessages
	return limit > 0 && r.ledger.buffered+len(r.ledger.withheld)+len(r.ledger.pending) >= limit*r.cfg.ParallelPullCount
}

// abandonBundle takes back what bundle seq emitted: it failed, so the
// runner discards its output. failed, the delivery whose processing
// failed (nil if none is known), goes back to Pub/Sub, which counts the
// attempt against it; the rest stays for the retry (requeue.go). The
// nacks go out through the client and, before it returns, with the RPC:
// the client sends nacks in batches every 100 ms, and Beam Go waits for
// nothing once a bundle failed, so a worker that exits at once would leave
// them unsent and the messages waiting out their leases.
func (r *splitReader) abandonBundle(seq int64, failed *delivery) {
	r.mu.Lock()
	r.bundleEndedLocked()
	nacks, conn := r.ledger.requeueFrom(seq, failed, r.cfg.Ordering == OrderingPerKey), r.conn
	r.mu.Unlock()
	r.sendByRPC(conn, nil, nacks)
}

// bundleEndedLocked marks the end of the split's bundle: LeaseIdle counts
// from now.
func (r *splitReader) bundleEndedLocked() {
	r.inBundle = false
	r.lastPolled = r.now()
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
