// Package metrics is how pubsubio reports to Beam. Beam accepts a metric
// update only with a DoFn call's context, while pubsubio counts where none
// is at hand: in the client's callbacks, on background goroutines, in
// Teardown, deep inside a wait. So every count is kept here and reported
// into Beam by the next DoFn call that has a context. Every metric is in
// one namespace, Namespace.
package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// Namespace is the namespace of every pubsubio metric.
const Namespace = "pubsubio"

// Counter is a count reported into one Beam counter. Every increment is
// reported exactly once, by whichever DoFn call reports next.
type Counter struct {
	metric   beam.Counter
	total    atomic.Int64
	reported atomic.Int64
}

// NewCounter returns a Counter reporting into the Beam counter name.
func NewCounter(name string) *Counter {
	return &Counter{metric: beam.NewCounter(Namespace, name)}
}

// Add counts n; it needs no context and is safe from any goroutine.
func (c *Counter) Add(n int64) {
	if n != 0 {
		c.total.Add(n)
	}
}

// Load returns everything counted so far, reported or not.
func (c *Counter) Load() int64 { return c.total.Load() }

// Report adds to the Beam counter, with a DoFn call's context, what was
// counted since the last report.
func (c *Counter) Report(ctx context.Context) {
	for {
		done, now := c.reported.Load(), c.total.Load()
		if now <= done {
			return
		}
		if c.reported.CompareAndSwap(done, now) {
			c.metric.Inc(ctx, now-done)
			return
		}
	}
}

// Counters are counters named at run time (by an error code, by a topic),
// created on first use.
type Counters struct {
	mu     sync.Mutex
	byName map[string]*Counter
}

// Add counts n under name.
func (s *Counters) Add(name string, n int64) {
	s.mu.Lock()
	c := s.byName[name]
	if c == nil {
		if s.byName == nil {
			s.byName = map[string]*Counter{}
		}
		c = NewCounter(name)
		s.byName[name] = c
	}
	s.mu.Unlock()
	c.Add(n)
}

// Load returns what was counted under name.
func (s *Counters) Load(name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.byName[name]; c != nil {
		return c.Load()
	}
	return 0
}

// Report reports every counter of the set.
func (s *Counters) Report(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.byName {
		c.Report(ctx)
	}
}

// Distribution collects values for one Beam distribution until a DoFn call
// reports them.
type Distribution struct {
	metric beam.Distribution
	mu     sync.Mutex
	values []int64
}

// NewDistribution returns a Distribution reporting into the Beam
// distribution name.
func NewDistribution(name string) *Distribution {
	return &Distribution{metric: beam.NewDistribution(Namespace, name)}
}

// Add records v.
func (d *Distribution) Add(v int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.values = append(d.values, v)
}

// Report reports what was recorded since the last report.
func (d *Distribution) Report(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range d.values {
		d.metric.Update(ctx, v)
	}
	d.values = d.values[:0]
}

// NewGauge returns the Beam gauge name. A gauge is set with the context of
// the call that samples it, so it needs no deferral.
func NewGauge(name string) beam.Gauge { return beam.NewGauge(Namespace, name) }

// ReportInterval is how often a DoFn call that runs long (a bundle waiting
// for Pub/Sub) reports while it runs, so that gauges show it in progress.
const ReportInterval = time.Second

// Throttle spaces reports made while a bundle runs by ReportInterval.
type Throttle struct {
	last time.Time
}

// Due reports whether a report is due at now, and if so counts it as made.
func (t *Throttle) Due(now time.Time) bool {
	if now.Sub(t.last) < ReportInterval {
		return false
	}
	t.last = now
	return true
}
