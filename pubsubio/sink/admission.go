package sink

import (
	"context"
	"time"
)

// admissionGrace is how long admission at a cap waits for verdicts before
// flushing the batchers: the client's default batch delay. Verdicts of
// batches already sent usually make room within it.
const admissionGrace = 10 * time.Millisecond

// admit returns once a message of size bytes fits under the in-flight caps.
//
// A message counts from the moment it is accepted, which is before it goes
// anywhere, so at a cap everything may still sit in the client's batchers
// or in groups (grouping.go). If no verdict makes room within
// admissionGrace, the wait publishes the groups and sends what the
// batchers hold: otherwise the batch delay would be part of every wait at
// the cap, a delay longer than PublishProgressTimeout would fail a healthy
// topic, and grouped messages would never leave. It does not flush at
// once: verdicts arrive a few at a time, and flushing after each would
// send every batch nearly empty (BENCHMARKS.md has the measurement). With
// nothing sent, no verdict can come, so it does not wait for one either.
// At MaxGroupedMessages it publishes the groups first: only that makes
// room there.
func (w *writer) admit(ctx context.Context, size int64) error {
	if w.groupedMsgs >= w.cfg.MaxGroupedMessages {
		if err := w.publishGroups(ctx); err != nil {
			return err
		}
	}
	fits := func() bool { return w.fits(size) }
	if fits() || (w.inflightMsgs > 0 && w.waitBriefly(ctx, admissionGrace, fits)) {
		return nil
	}
	if err := w.publishGroups(ctx); err != nil {
		return err
	}
	w.flushAll()
	return w.waitFor(ctx, "waiting for room under MaxInFlightMessages/MaxInFlightBytes", fits)
}

// waitBriefly classifies verdicts for at most d and reports whether done()
// then holds. A failure is left to the caller's waitFor, which returns it.
func (w *writer) waitBriefly(ctx context.Context, d time.Duration, done func() bool) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		w.poll(ctx)
		if w.failure != nil {
			return false
		}
		if done() {
			return true
		}
		select {
		case <-w.done.notify:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// fits is the admission predicate. It is checked before the publish, not
// against the message's own size alone: a message larger than
// MaxInFlightBytes is admitted when nothing is in flight or grouped,
// because then no completion can ever make room for it. Grouped messages
// count for bytes only: admit keeps them under MaxGroupedMessages.
func (w *writer) fits(size int64) bool {
	msgs, bytes := w.accepted()
	if msgs == 0 {
		return true
	}
	return w.inflightMsgs < w.cfg.MaxInFlightMessages && bytes+size <= w.cfg.MaxInFlightBytes
}
