// Package deferredmetric counts what happens where Beam has no metrics
// context (a client's callback, a background goroutine, Teardown) and
// reports it into a Beam counter from the next DoFn call that has one.
// Beam metrics can only be updated with a DoFn's context, and a count
// written in Teardown would never be scraped otherwise.
package deferredmetric

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// Counter is a process-wide count reported into one Beam counter. Every
// increment is reported exactly once, by whichever DoFn call reports next.
type Counter struct {
	metric beam.Counter
	total  atomic.Int64

	mu       sync.Mutex
	reported int64
}

// NewCounter returns a Counter reporting into the Beam counter
// namespace/name.
func NewCounter(namespace, name string) *Counter {
	return &Counter{metric: beam.NewCounter(namespace, name)}
}

// Add counts n; it needs no context and is safe from any goroutine.
func (c *Counter) Add(n int64) { c.total.Add(n) }

// Load returns everything counted so far, reported or not.
func (c *Counter) Load() int64 { return c.total.Load() }

// Report adds to the Beam counter, with a DoFn call's context, what was
// counted since the last report.
func (c *Counter) Report(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.total.Load(); n > c.reported {
		c.metric.Inc(ctx, n-c.reported)
		c.reported = n
	}
}
