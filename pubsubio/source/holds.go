package source

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
)

// Holds: a split holds a message, its lease extended by the client, from
// its delivery until the next bundle after the runner committed it acks it
// (or the split gives it back). On a runner that commits at checkpoints
// (Flink) that is a checkpoint interval or more; a stalled commit holds it
// until the client stops extending, MaxExtension after the delivery, and
// Pub/Sub then redelivers it: a duplicate, and a delivery attempt spent.
// So MaxExtension is the hold bound: the janitor (registry.go) gives back
// what was held that long, on purpose and counted in
// messages_nacked_hold, and warns once per read when a hold passes half of
// it. The gauge held_oldest_age_ms shows the oldest hold.

var heldOldestAgeGauge = metrics.NewGauge("held_oldest_age_ms")

// lease records d, just buffered or withheld, among what the split holds.
func (l *ledger) lease(d *delivery) {
	l.leased = append(l.leased, d)
	if len(l.leased) > 2*(l.buffered+len(l.pending)+len(l.withheld))+64 {
		l.leased = slices.DeleteFunc(l.leased, func(d *delivery) bool { return d.state == gone })
	}
}

// oldestLeased is when the oldest delivery the split holds arrived; zero
// if it holds none.
func (l *ledger) oldestLeased() time.Time {
	for len(l.leased) > 0 && l.leased[0].state == gone {
		l.leased = l.leased[1:]
	}
	if len(l.leased) == 0 {
		return time.Time{}
	}
	return l.leased[0].arrived
}

// giveBackHeldSince gives back what the split has held since before t,
// and returns how many.
func (l *ledger) giveBackHeldSince(t time.Time) int {
	n := 0
	for len(l.leased) > 0 && !l.leased[0].arrived.After(t) {
		d := l.leased[0]
		l.leased = l.leased[1:]
		switch d.state {
		case gone:
			continue
		case withheld:
			l.withheld = slices.DeleteFunc(l.withheld, func(w *delivery) bool { return w == d })
		}
		l.end(d, nackIt, nackedHold)
		n++
	}
	return n
}

// enforceHoldBound gives back what the split has held for MaxExtension or
// longer, and returns when the oldest delivery it still holds arrived.
func (r *splitReader) enforceHoldBound(now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.ledger.giveBackHeldSince(now.Add(-r.cfg.MaxExtension)); n > 0 {
		log.Warnf(context.Background(), "pubsubio.Read: gave back %d messages of %s held for MaxExtension %v without a commit: the client stops extending their leases then, "+
			"so Pub/Sub redelivers them (a duplicate if their bundle commits after all, and a delivery attempt each); the runner commits less often than MaxExtension covers: raise it, or commit more often",
			n, r.split.Subscription, r.cfg.MaxExtension)
	}
	return r.ledger.oldestLeased()
}

// holdState is what a read's janitor pass found of its holds in this
// process: the arrival of the oldest delivery held (Unix nanoseconds, 0 if
// none), reported as held_oldest_age_ms by each bundle, and whether a hold
// of half MaxExtension was warned about.
type holdState struct {
	oldest atomic.Int64
	warned atomic.Bool
}

// record stores the oldest of the read's holds at now, warning once when
// it has been held for half of maxExtension.
func (h *holdState) record(ctx context.Context, oldest, now time.Time, maxExtension time.Duration) {
	if oldest.IsZero() {
		h.oldest.Store(0)
		return
	}
	h.oldest.Store(oldest.UnixNano())
	if age := now.Sub(oldest); age >= maxExtension/2 && h.warned.CompareAndSwap(false, true) {
		log.Warnf(ctx, "pubsubio.Read: a message has been held for %v without a commit, over half of MaxExtension %v, at which it is given back for redelivery: "+
			"the runner commits less often than that (a checkpoint interval, a stalled commit); raise MaxExtension above the longest commit interval, or commit more often. Logged once per read",
			age.Round(time.Second), maxExtension)
	}
}

// report sets held_oldest_age_ms at now.
func (h *holdState) report(ctx context.Context, now time.Time) {
	var age int64
	if t := h.oldest.Load(); t != 0 {
		age = max(now.Sub(time.Unix(0, t)).Milliseconds(), 0)
	}
	heldOldestAgeGauge.Set(ctx, age)
}

// holdWarnings say when the lease settings cannot cover how long the read
// holds a message: a split not polled is released after LeaseIdle, and if
// the client stopped extending its messages' leases before that, Pub/Sub
// redelivers them while the split still holds them.
func (cfg Config) holdWarnings() []string {
	if cfg.MaxExtension >= cfg.LeaseIdle {
		return nil
	}
	return []string{fmt.Sprintf("pubsubio.Read: MaxExtension %v is under LeaseIdle %v: a split not polled holds its messages until LeaseIdle releases it, "+
		"but the client stops extending their leases after MaxExtension, so Pub/Sub redelivers them meanwhile (duplicates, and a delivery attempt each); raise MaxExtension or lower LeaseIdle",
		cfg.MaxExtension, cfg.LeaseIdle)}
}
