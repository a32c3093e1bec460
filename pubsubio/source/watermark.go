package source

import (
	"math"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
)

// The watermark: what each split reports with its checkpoint, and so when
// the windows of the pipeline fire and what is late. Pub/Sub's data plane
// shows no backlog, so it is estimated from what arrives:
//
//   - Each message's lag is its arrival minus its event time: zero for one
//     stamped ahead of the clock, and for one already behind the split's
//     watermark no more than the watermark trailed its arrival (intake.go,
//     lagOf). While messages arrive, the split's
//     watermark trails the moment it last listened by the largest lag seen
//     within WatermarkWindow, plus WatermarkLateness: whatever arrives next,
//     if it is no later than what arrived recently, is not late. A
//     caught-up subscription has a lag of the delivery latency, so windows
//     fire about WatermarkLateness after they end; a lagging one has the
//     lag of its backlog, so the watermark follows the event times it reads.
//   - It never passes now minus WatermarkLateness, a message the split
//     buffered and has not emitted, nor one the read gave back (a failed
//     bundle, a stopped subscriber) and has not seen again, for up to
//     WatermarkWindow.
//   - It advances only as far as the split listened: stopped at the budget,
//     waiting for room in it, holding a full flow-control window, or with a
//     failing stream (health.go), it does not listen, and what arrives after
//     that has waited on the server. Under a steady load the window fills
//     and empties many times a second, and every arrival is a moment it
//     listened, so the watermark keeps moving while a backlog drains.
//   - A split that has received nothing for WatermarkIdle while listening
//     moves to now minus WatermarkLateness, so an idle subscription never
//     holds the pipeline back.
//   - The read reports, for every split, the lowest watermark of the splits
//     this process runs (registry.go): a runner may take the latest
//     checkpoint's estimate as the whole stage's (Prism 2.77 does), and one
//     split's must not pass another's messages. A split without an estimate
//     WatermarkIdle after it started, or not polled for WatermarkIdle (it
//     moved to another worker, or its bundle is stuck), holds the others
//     only at the messages it holds unemitted (splitReader.hold).
//   - Event times Beam cannot carry are decode failures (decode.go), and
//     every sum saturates, so no message can move it to the end of time.
//
// What it trades: a message that arrives later, relative to its event time,
// than WatermarkLateness beyond what arrived in the last WatermarkWindow is
// late (a redelivery after a crash elsewhere, a stream Pub/Sub stalled); the
// read counts it (late_messages) and follows LatePolicy, and a pipeline that
// must keep such messages sets an allowed lateness on its windows (docs/event-time.md,
// Windows and watermarks).

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

// next is the split's watermark candidate in state s, zero for none (the
// watermark stays where it is); the caller keeps it monotone.
func (p watermarkPolicy) next(s splitState) time.Time {
	var c time.Time
	switch {
	case s.hasLag:
		c = s.listenedAt.Add(-addSaturating(s.maxLag, p.Lateness))
	case s.listening && s.at.Sub(s.listeningSince) >= p.Idle:
		c = s.at
	default:
		return time.Time{}
	}
	if limit := s.at.Add(-p.Lateness); c.After(limit) {
		c = limit
	}
	if !s.oldestBuffered.IsZero() && s.oldestBuffered.Before(c) {
		c = s.oldestBuffered
	}
	return c
}

// addSaturating is a + b for durations that are not negative, the largest
// duration if that overflows.
func addSaturating(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// holdSkip is why the read's watermark leaves a split's own estimate out.
type holdSkip uint8

const (
	notSkipped  holdSkip = iota
	unestimated          // no estimate WatermarkIdle after it started
	stale                // not polled for WatermarkIdle
)

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

// splitState is what a bundle needs at its end to decide how to continue,
// and what the split's watermark is computed from (watermarkPolicy.next).
type splitState struct {
	at       time.Time
	buffered int
	withheld int
	// listening is false while the split's subscriber is stopped, waits for
	// room in the budget or withholds deliveries, holds as much as flow
	// control lets Pub/Sub send, or its stream fails (within
	// WatermarkMaxOutage): what arrives after that has waited on the server.
	listening bool
	// listenedAt is when the split last listened: at while it listens, and
	// otherwise the last arrival or bundle end that found it listening.
	listenedAt time.Time
	// listeningSince is when the split last received a message, or started
	// listening (as far as bundle ends saw); at while it is not listening,
	// so that it never looks idle then.
	listeningSince time.Time
	// maxLag is the largest lag of the arrivals within WatermarkWindow, if
	// hasLag.
	maxLag time.Duration
	hasLag bool
	// oldestBuffered is the oldest event time among the buffered messages
	// (zero if none): they are emitted later.
	oldestBuffered time.Time
}
