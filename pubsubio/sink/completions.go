package sink

import (
	"context"
	"sync"
)

// completions hands publish verdicts from the client to the DoFn's
// goroutine, which alone classifies them and updates the writer's state.
//
// The client's PublishResult offers only a Ready channel, so something must
// wait on it. One goroutine per publish would hold a stack per message in
// flight (BENCHMARKS.md, memory); instead each lane, the publishes to one
// destination with one ordering key, has at most one goroutine that follows
// them in publish order and exits when the lane is empty. The client resolves a lane's results in that order, or close to
// it when several batches without a key are in the air at once, so a
// verdict waits at most for its lane's earlier publishes; lanes never wait
// on each other, so a key stuck in retries holds back only itself.
//
// The queue of verdicts is unbounded on purpose: a repair republishes
// without checking the caps, so no capacity would be safe, and what it
// holds is bounded by what was admitted.
type completions struct {
	mu     sync.Mutex
	lanes  map[lane][]*outbound // publishes awaiting a verdict, by lane, in publish order
	queue  []*outbound          // verdicts not yet taken
	spare  []*outbound
	notify chan struct{} // one token: "the queue may be non-empty"
}

// lane is one destination and ordering key.
type lane struct {
	dest *dest
	key  string
}

func newCompletions() completions {
	return completions{lanes: map[lane][]*outbound{}, notify: make(chan struct{}, 1)}
}

// watch queues o once its result is ready.
func (c *completions) watch(o *outbound) {
	l := lane{o.dest, o.msg.OrderingKey}
	c.mu.Lock()
	waiting, running := c.lanes[l]
	c.lanes[l] = append(waiting, o)
	c.mu.Unlock()
	if !running {
		go c.follow(l)
	}
}

// follow waits on lane l's publishes in order until the lane is empty.
func (c *completions) follow(l lane) {
	for {
		c.mu.Lock()
		waiting := c.lanes[l]
		if len(waiting) == 0 {
			delete(c.lanes, l)
			c.mu.Unlock()
			return
		}
		o := waiting[0]
		waiting[0] = nil
		c.lanes[l] = waiting[1:]
		c.mu.Unlock()

		<-o.res.Ready()
		_, err := o.res.Get(context.Background()) // returns at once: the result is ready
		c.mu.Lock()
		o.err = err
		c.queue = append(c.queue, o)
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
}

// take returns what has been queued since the last take. The slice is
// valid until the next take.
func (c *completions) take() []*outbound {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.queue
	c.queue = c.spare[:0]
	c.spare = got
	return got
}

// poll classifies every verdict that has arrived and returns how many.
func (w *writer) poll(ctx context.Context) int {
	got := w.done.take()
	for i, o := range got {
		w.complete(ctx, o)
		got[i] = nil
	}
	return len(got)
}
