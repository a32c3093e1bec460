package source

import (
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
)

// The watermark: what each split reports with its checkpoint, and so when
// the windows of the pipeline fire and what is late. Pub/Sub's data plane
// shows no backlog, so it is estimated from what arrives:
//
//   - Each message's lag is its arrival minus its event time. While
//     messages arrive, the split's watermark trails the clock by the
//     largest lag seen within WatermarkWindow, plus WatermarkLateness:
//     whatever arrives next, if it is no later than what arrived recently,
//     is not late. A caught-up subscription has a lag of the delivery
//     latency, so windows fire about WatermarkLateness after they end; a
//     lagging one has the lag of its backlog, so the watermark follows the
//     event times it reads.
//   - It never passes a message the split buffered and has not emitted,
//     nor one the read gave back (a failed bundle, a stopped subscriber)
//     and has not seen again, for up to WatermarkWindow.
//   - It does not move while the split is not listening: stopped at the
//     budget, waiting for room in it, or held back by flow control, since
//     what arrives after that has waited on the server.
//   - A split that has received nothing since it started listening moves
//     to now minus WatermarkLateness once WatermarkIdle has passed, so an
//     idle subscription never holds the pipeline back.
//   - The read reports, for every split, the lowest watermark of the splits
//     this process runs (registry.go): a runner may take the latest
//     checkpoint's estimate as the whole stage's (Prism 2.77 does), and one
//     split's must not pass another's messages.
//
// What it trades: a message that arrives later, relative to its event time,
// than WatermarkLateness beyond what arrived in the last WatermarkWindow is
// late (a redelivery after a crash elsewhere, a stream Pub/Sub stalled); a
// pipeline that must keep such messages sets an allowed lateness on its
// windows (README, Windows and watermarks).

// watermarkEstimator is a manual, monotone estimator: the read sets it at
// the end of each bundle. Its state is Unix millis.
type watermarkEstimator struct {
	state int64
}

func (e *watermarkEstimator) CurrentWatermark() time.Time { return time.UnixMilli(e.state) }

// advance moves the watermark to t if that is later; it never goes back.
func (e *watermarkEstimator) advance(t time.Time) {
	if ms := t.UnixMilli(); ms > e.state {
		e.state = ms
	}
}

// finish moves the watermark to the end of time: a bounded split is done.
func (e *watermarkEstimator) finish() { e.advance(mtime.MaxTimestamp.ToTime()) }

// watermarkPolicy is the options that shape a split's watermark.
type watermarkPolicy struct {
	Window, Idle, Lateness time.Duration
}

func (cfg Config) watermarkPolicy() watermarkPolicy {
	return watermarkPolicy{Window: cfg.WatermarkWindow, Idle: cfg.WatermarkIdle, Lateness: cfg.WatermarkLateness}
}

// next is the split's watermark candidate at now, zero for none (the
// watermark stays where it is); the caller keeps it monotone.
func (p watermarkPolicy) next(now time.Time, s splitState) time.Time {
	if !s.listening {
		return time.Time{}
	}
	var c time.Time
	switch {
	case s.hasLag:
		c = now.Add(-s.maxLag - p.Lateness)
	case now.Sub(s.listeningSince) >= p.Idle:
		c = now.Add(-p.Lateness)
	default:
		return time.Time{}
	}
	if !s.oldestBuffered.IsZero() && s.oldestBuffered.Before(c) {
		c = s.oldestBuffered
	}
	return c
}

// lagSlots is how many slots arrivalLags divides its window into: the
// largest lag is remembered for between 15/16 and all of the window.
const lagSlots = 16

// arrivalLags remembers the largest lag of the arrivals within a window, in
// slots of a sixteenth of it, so that an update and a query cost a few
// comparisons.
type arrivalLags struct {
	window time.Duration
	slots  [lagSlots]lagSlot
}

type lagSlot struct {
	start int64 // slot number: Unix nanoseconds / slot width
	max   time.Duration
	used  bool
}

func (a *arrivalLags) width() int64 { return max(int64(a.window)/lagSlots, 1) }

// add records the lag of a message that arrived at t.
func (a *arrivalLags) add(t time.Time, lag time.Duration) {
	n := t.UnixNano() / a.width()
	s := &a.slots[n%lagSlots]
	if !s.used || s.start != n {
		*s = lagSlot{start: n, max: lag, used: true}
		return
	}
	s.max = max(s.max, lag)
}

// largest returns the largest lag of the arrivals within the window before
// now, and whether there were any.
func (a *arrivalLags) largest(now time.Time) (time.Duration, bool) {
	n := now.UnixNano() / a.width()
	var lag time.Duration
	found := false
	for _, s := range a.slots {
		if !s.used || s.start <= n-lagSlots || s.start > n {
			continue
		}
		if !found || s.max > lag {
			lag, found = s.max, true
		}
	}
	return lag, found
}
