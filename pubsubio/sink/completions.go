package sink

import (
	"context"
	"sync"
)

// completions hands publish verdicts from the client's goroutines to the
// DoFn's goroutine, which alone classifies them and updates the writer's
// state. The client's PublishResult offers only a Ready channel, so each
// publish gets a small goroutine that waits on it and queues the message.
// The queue is unbounded on purpose: a repair republishes without checking
// the caps, so no capacity would be safe, and what it holds is bounded by
// what was admitted.
type completions struct {
	mu     sync.Mutex
	queue  []*pending
	spare  []*pending
	notify chan struct{} // one token: "the queue may be non-empty"
}

func newCompletions() completions {
	return completions{notify: make(chan struct{}, 1)}
}

// watch queues p once its result is ready.
func (c *completions) watch(p *pending) {
	res := p.res
	go func() {
		<-res.Ready()
		_, err := res.Get(context.Background()) // returns at once: the result is ready
		c.mu.Lock()
		p.err = err
		c.queue = append(c.queue, p)
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}()
}

// take returns what has been queued since the last take. The slice is
// valid until the next take.
func (c *completions) take() []*pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.queue
	c.queue = c.spare[:0]
	c.spare = got
	return got
}

// poll classifies every verdict that has arrived and returns how many.
func (w *writer) poll() int {
	got := w.done.take()
	for i, p := range got {
		w.complete(p)
		got[i] = nil
	}
	return len(got)
}
