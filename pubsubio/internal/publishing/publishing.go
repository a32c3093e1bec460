// Package publishing holds what the sink and the dead-letter writer both
// do with the client's publishers: flush without blocking, and stop within
// a bound.
package publishing

import (
	"sync"
	"time"
)

// Flusher runs a publisher's Flush in the background. The client's Flush
// returns only once every batch is handled, and a DoFn's waits must stay
// within their own bounds. At most one flush runs at a time; a request
// while one runs makes it flush again when it returns, so that nothing
// published since its start waits for the batch delay. The zero value is
// ready to use.
type Flusher struct {
	mu      sync.Mutex
	running bool
	again   bool
	wg      sync.WaitGroup
}

// Flush calls flush in the background, or once more after the running one.
func (f *Flusher) Flush(flush func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		f.again = true
		return
	}
	f.running = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			flush()
			f.mu.Lock()
			again := f.again
			f.again = false
			if !again {
				f.running = false
			}
			f.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// Wait returns once no flush runs: the client's Flush and Stop must not
// overlap.
func (f *Flusher) Wait() { f.wg.Wait() }

// StopAll runs every stop concurrently and waits for them against one
// deadline, timeout from now, so that stopping many publishers costs one
// timeout, not one each. It returns the indexes of the stops still running
// at the deadline; they go on in the background. The bound is needed: a
// client's Stop sends what is batched and waits for every batch, and a
// batch being retried through an outage holds it until the publish
// timeout.
func StopAll(timeout time.Duration, stops ...func()) (abandoned []int) {
	done := make([]chan struct{}, len(stops))
	for i, stop := range stops {
		done[i] = make(chan struct{})
		go func() {
			defer close(done[i])
			stop()
		}()
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	expired := false
	for i, d := range done {
		if !expired {
			select {
			case <-d:
				continue
			case <-deadline.C:
				expired = true
			}
		}
		select {
		case <-d:
		default:
			abandoned = append(abandoned, i)
		}
	}
	return abandoned
}
