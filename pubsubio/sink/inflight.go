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
// A message counts from the moment a publisher accepts it, which is before
// it goes anywhere, so at a cap everything in flight may still sit in the
// client's batchers. If no verdict makes room within admissionGrace, the
// wait sends what they hold: otherwise the batch delay would be part of
// every wait at the cap, and a delay longer than PublishProgressTimeout
// would fail a healthy topic. It does not flush at once: verdicts arrive a
// few at a time, so a writer at the cap would flush after each and send
// every batch nearly empty (measured: half the raw client's throughput).
func (w *writer) admit(ctx context.Context, size int64) error {
	fits := func() bool { return w.fits(size) }
	if fits() || w.waitBriefly(ctx, admissionGrace, fits) {
		return nil
	}
	w.flushAll()
	return w.await(ctx, "waiting for room under MaxInFlightMessages/MaxInFlightBytes", fits)
}

// waitBriefly classifies verdicts for at most d and reports whether done()
// then holds. A failure is left to the caller's await, which returns it.
func (w *writer) waitBriefly(ctx context.Context, d time.Duration, done func() bool) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		w.poll()
		if w.err != nil {
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
// MaxInFlightBytes is admitted when nothing is in flight, because with
// nothing in flight no completion can ever make room for it.
func (w *writer) fits(size int64) bool {
	if w.inflightMsgs == 0 {
		return true
	}
	return w.inflightMsgs < w.cfg.MaxInFlightMessages && w.inflightBytes+size <= w.cfg.MaxInFlightBytes
}

// flushAll asks every publisher with something in flight to send what it
// batches now.
func (w *writer) flushAll() {
	for e := w.lru.Front(); e != nil; e = e.Next() {
		if d := e.Value.(*dest); d.inflight > 0 {
			d.flushAsync()
		}
	}
}

// flushAsync sends what d's publisher batches without blocking the DoFn:
// the client's Flush returns only once every batch is handled, and waits
// must stay under the progress budget (progress.go). At most one flush
// goroutine runs per destination; a request while one runs makes it flush
// again when it returns, so nothing added since its start waits for the
// batch delay.
func (d *dest) flushAsync() {
	d.flushMu.Lock()
	defer d.flushMu.Unlock()
	if d.flushRunning {
		d.flushAgain = true
		return
	}
	d.flushRunning = true
	d.flushes.Add(1)
	go func() {
		defer d.flushes.Done()
		for {
			d.pub.flush()
			d.flushMu.Lock()
			again := d.flushAgain
			d.flushAgain = false
			if !again {
				d.flushRunning = false
			}
			d.flushMu.Unlock()
			if !again {
				return
			}
		}
	}()
}
