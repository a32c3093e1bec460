package source

import (
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
)

// watermarkEstimator is a manual, monotone estimator: the read sets it at
// the end of each bundle from watermarkPolicy. Its state is Unix millis.
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

// watermarkPolicy estimates a split's watermark from what arrives. Pub/Sub's
// data plane shows no backlog, so the estimate is built from arrivals:
//   - messages buffered that arrived within Window hold it at their oldest
//     event time (Pub/Sub delivers a backlog roughly oldest first, so this
//     tracks a lagging consumer);
//   - otherwise, while messages keep arriving, it follows the newest event
//     time emitted, at most now minus Lateness;
//   - once nothing has arrived for Idle, it advances to now minus Lateness,
//     so an idle subscription never holds the pipeline back.
//
// A message arriving behind the watermark is late data to the pipeline; its
// windows apply their allowed lateness as usual.
type watermarkPolicy struct {
	Window, Idle, Lateness time.Duration
}

// next is the watermark candidate at now; the estimator keeps it monotone.
func (p watermarkPolicy) next(now time.Time, s splitState) time.Time {
	ceiling := now.Add(-p.Lateness)
	switch {
	case !s.oldestRecent.IsZero():
		return earliest(s.oldestRecent, ceiling)
	case now.Sub(s.listeningSince) >= p.Idle:
		return ceiling
	case !s.newestEmitted.IsZero():
		return earliest(s.newestEmitted, ceiling)
	}
	return time.Time{}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
