package source

import (
	"context"
	"time"
)

// The bundle protocol: what one bundle of a split asks of its reader. A
// bundle calls beginBundle, emits what it got, then calls endBundle; if it
// fails after beginBundle, abandonBundle gives back what it emitted. Each
// step takes the reader's lock once.

// beginBundle acks what the bundle before rest emitted (the runner
// persisted rest, so it committed that bundle), gives back what an earlier
// attempt of this bundle emitted (a retry), makes sure the subscriber runs,
// and returns up to limit buffered deliveries for the bundle to emit. For
// a final restriction it only acks and gives back.
func (r *splitReader) beginBundle(ctx context.Context, rest Restriction, limit int) ([]*delivery, error) {
	ids := make([]ackID, len(rest.AckIDs))
	for i, id := range rest.AckIDs {
		ids[i] = ackID(id)
	}
	if rest.Owner != processID {
		// Emitted by another process: only the RPC can ack them, and it is
		// a network call, made without the lock.
		r.ackRemote(ctx, ids)
		ids = nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.lastPolled = now
	if len(ids) > 0 {
		r.stats.add(acksResume, r.ledger.ack(ids, now))
	}
	// Anything this split emitted under this bundle's number or later is
	// output the runner discarded: this bundle is a retry.
	r.ledger.giveBackFrom(rest.Seq)
	if rest.Final {
		return nil, nil
	}
	if err := r.startLocked(ctx); err != nil {
		return nil, err
	}
	return r.ledger.drain(limit, rest.Seq, now), nil
}

// splitState is what a bundle needs at its end to decide how to continue
// and where the watermark goes.
type splitState struct {
	buffered int
	// listeningSince is when the split last received a message, or started
	// listening; now while it is not listening (stopped, or holding
	// deliveries back until the budget has room), so that it never looks
	// idle then.
	listeningSince time.Time
	newestEmitted  time.Time
	// oldestRecent is the oldest event time among buffered messages that
	// arrived after the cutoff passed to endBundle (zero if none).
	oldestRecent time.Time
}

// endBundle nacks what the bundle could not decode under DecodeNack, notes
// the newest event time it emitted, and returns the split's state, with
// oldestRecent over the deliveries that arrived after cutoff.
func (r *splitReader) endBundle(nacks []*delivery, newest, cutoff time.Time) splitState {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range nacks {
		// At once, through its subscriber, so that Pub/Sub counts the
		// delivery attempt and redelivers it (or forwards it to the
		// subscription's dead-letter topic) without waiting for a deadline.
		r.ledger.end(d, nackIt, nackedDecode)
	}
	if newest.After(r.newestEmit) {
		r.newestEmit = newest
	}
	s := splitState{
		buffered:       r.ledger.buffered,
		listeningSince: r.lastArrival,
		newestEmitted:  r.newestEmit,
		oldestRecent:   r.ledger.oldestRecent(cutoff),
	}
	if r.running == nil || r.waiting > 0 {
		// Not listening: without this, a bundle that stalled downstream past
		// IdleTimeout would end a bounded read with the backlog the budget
		// gave back, or held back, unread.
		s.listeningSince = r.now()
	}
	return s
}

// abandonBundle gives back what bundle seq emitted: it failed, so the
// runner discards its output.
func (r *splitReader) abandonBundle(seq int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ledger.giveBackFrom(seq)
}
