package sink

import "context"

// admit returns once a message of size bytes fits under the in-flight caps.
//
// A message counts from the moment a publisher accepts it, which is before
// it goes anywhere, so at a cap everything in flight may still sit in the
// client's batchers. Blocking therefore first sends what they hold, once:
// otherwise the batch delay would be part of every wait at the cap, and a
// delay longer than PublishProgressTimeout would fail a healthy topic.
func (w *writer) admit(ctx context.Context, size int64) error {
	if w.fits(size) {
		return nil
	}
	w.flushAll()
	return w.await(ctx, "waiting for room under MaxInFlightMessages/MaxInFlightBytes", func() bool { return w.fits(size) })
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
