package source

import (
	"context"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// splitKey identifies a split across bundles: the read (a random ID fixed at
// graph construction) and the split's index.
type splitKey struct {
	read  string
	index int
}

// readState is what one read keeps per process: its split readers, its
// budget, what it gave back, its counts, and how many DoFn instances use
// it.
type readState struct {
	readers   map[int]*splitReader
	budget    *budget
	givenBack *givenBack
	stats     *stats
	holds     holdState
	// maxExtension is the read's MaxExtension: the hold bound (holds.go).
	maxExtension time.Duration
	users        int
}

func newReadState(cfg Config) *readState {
	s := newStats()
	return &readState{
		readers:      map[int]*splitReader{},
		budget:       newBudget(cfg.BufferMaxMessages, cfg.BufferMaxBytes),
		givenBack:    newGivenBack(cfg.WatermarkWindow, s),
		stats:        s,
		maxExtension: cfg.MaxExtension,
	}
}

// flush reports the read's metrics (stats.flush) and its oldest hold.
func (rs *readState) flush(ctx context.Context) {
	rs.stats.flush(ctx, rs.budget)
	rs.holds.report(ctx, time.Now())
}

// registry holds every split reader of the process. Subscribers must
// outlive bundles (a streaming pull per bundle would cost a connection per
// bundle and redeliver everything in flight), so they live here, keyed by
// split, and are released when their split is not polled for LeaseIdle or
// the last DoFn instance of their read is torn down.
type registry struct {
	now  func() time.Time
	dial func(context.Context, Split, Config, *givenBack) (puller, error)
	// watchBacklog, when set, gives each new split reader its watch of
	// its subscription's backlog (backlog.go).
	watchBacklog func(Config, model.Subscription, time.Time) *backlogWatch

	mu            sync.Mutex
	reads         map[string]*readState
	janitor       *time.Ticker
	janitorPeriod time.Duration
}

// readers is the process's registry.
var readers = func() *registry {
	g := newRegistry(time.Now, func(ctx context.Context, s Split, cfg Config, g *givenBack) (puller, error) {
		return dialPuller(ctx, s.Subscription, cfg, g)
	})
	g.watchBacklog = watchBacklog
	return g
}()

func newRegistry(now func() time.Time, dial func(context.Context, Split, Config, *givenBack) (puller, error)) *registry {
	return &registry{now: now, dial: dial, reads: map[string]*readState{}}
}

// attach registers a DoFn instance of read; detach undoes it.
func (g *registry) attach(read string, cfg Config) *readState {
	g.mu.Lock()
	defer g.mu.Unlock()
	rs := g.readLocked(read, cfg)
	rs.users++
	return rs
}

func (g *registry) readLocked(read string, cfg Config) *readState {
	rs := g.reads[read]
	if rs == nil {
		rs = newReadState(cfg)
		g.reads[read] = rs
	}
	return rs
}

// detach drops a DoFn instance of read; the last one releases its splits.
func (g *registry) detach(read string) {
	g.mu.Lock()
	rs := g.reads[read]
	if rs == nil {
		g.mu.Unlock()
		return
	}
	rs.users--
	var release []*splitReader
	if rs.users <= 0 {
		for _, r := range rs.readers {
			release = append(release, r)
		}
		delete(g.reads, read)
	}
	g.mu.Unlock()
	releaseAll(release, nackedRelease)
}

// reader returns the split's reader, creating it if needed.
func (g *registry) reader(key splitKey, split Split, cfg Config) (*splitReader, *readState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rs := g.readLocked(key.read, cfg)
	r := rs.readers[key.index]
	if r == nil {
		r = newSplitReader(split, cfg, rs, g.now, func(ctx context.Context) (puller, error) {
			return g.dial(ctx, split, cfg, rs.givenBack)
		})
		if g.watchBacklog != nil {
			r.backlog = g.watchBacklog(cfg, split.Subscription, g.now())
		}
		rs.readers[key.index] = r
		g.startJanitorLocked(cfg.LeaseIdle)
		log.Infof(context.Background(), "pubsubio.Read: split %d of %s starts reading in this process", split.Index, split.Subscription)
	}
	r.touch()
	return r, rs
}

// watermark is the lowest watermark the read's splits in this process hold
// it at (splitReader.holdLocked; watermark.go), zero while one has none
// yet.
func (g *registry) watermark(read string) time.Time {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	rs := g.reads[read]
	if rs == nil {
		return time.Time{}
	}
	var low time.Time
	first := true
	for _, r := range rs.readers {
		r.mu.Lock() // the registry's lock, then a reader's: as in reader
		w, ok := r.holdLocked(now)
		r.mu.Unlock()
		if ok && (first || w.Before(low)) {
			low, first = w, false
		}
	}
	return low
}

// siblingHolds reports whether another split of key's read in this process
// that reads r's subscription holds deliveries it has not emitted: it
// emits them, or gives back what is beyond its MaxMessages share when it
// finishes, for r to read.
func (g *registry) siblingHolds(key splitKey, r *splitReader) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	rs := g.reads[key.read]
	if rs == nil {
		return false
	}
	for i, s := range rs.readers {
		if i == key.index || s.split.Subscription != r.split.Subscription {
			continue
		}
		s.mu.Lock() // the registry's lock, then a reader's: as in reader
		holds := !s.released && s.ledger.buffered+len(s.ledger.withheld) > 0
		s.mu.Unlock()
		if holds {
			return true
		}
	}
	return false
}

// releaseSplit releases r, the reader of key: at the end of a bounded
// split, or when the worker stops while r runs a bundle. A reader made
// for key since then stays.
func (g *registry) releaseSplit(key splitKey, r *splitReader, reason counter) {
	g.mu.Lock()
	if rs := g.reads[key.read]; rs != nil && rs.readers[key.index] == r {
		delete(rs.readers, key.index)
	}
	g.mu.Unlock()
	r.release(reason)
}

// janitorInterval is how often lease idleness is checked: often enough that
// a release happens within a fraction of LeaseIdle, bounded so a short
// LeaseIdle does not spin.
func janitorInterval(leaseIdle time.Duration) time.Duration {
	return max(leaseIdle/4, 50*time.Millisecond)
}

// startJanitorLocked runs the lease-idle check at the pace the shortest
// LeaseIdle of the process's reads needs.
func (g *registry) startJanitorLocked(leaseIdle time.Duration) {
	period := janitorInterval(leaseIdle)
	switch {
	case g.janitor == nil:
		g.janitor, g.janitorPeriod = time.NewTicker(period), period
		go func(t *time.Ticker) {
			for range t.C {
				g.releaseIdle()
			}
		}(g.janitor)
	case period < g.janitorPeriod:
		g.janitor.Reset(period)
		g.janitorPeriod = period
	}
}

// releaseIdle releases every split not polled for its read's LeaseIdle,
// and bounds the holds of the others (holds.go).
func (g *registry) releaseIdle() {
	now := g.now()
	g.mu.Lock()
	var idle []*splitReader
	for _, rs := range g.reads {
		var oldest time.Time
		for i, r := range rs.readers {
			if r.idleSince(now.Add(-r.cfg.LeaseIdle)) {
				idle = append(idle, r)
				delete(rs.readers, i)
				continue
			}
			if t := r.enforceHoldBound(now); !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
				oldest = t
			}
		}
		rs.holds.record(context.Background(), oldest, now, rs.maxExtension)
	}
	g.mu.Unlock()
	for _, r := range idle {
		log.Infof(context.Background(), "pubsubio.Read: releasing split %d of %s: not polled for LeaseIdle %v; what it held goes back to Pub/Sub", r.split.Index, r.split.Subscription, r.cfg.LeaseIdle)
	}
	releaseAll(idle, nackedRelease)
}

// releaseAll releases readers concurrently, so the shutdown waits overlap:
// releasing many splits costs one ShutdownTimeout, not one each.
func releaseAll(readers []*splitReader, reason counter) {
	var wg sync.WaitGroup
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.release(reason)
		}()
	}
	wg.Wait()
}
