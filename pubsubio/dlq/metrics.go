package dlq

import (
	"context"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
)

// Beam metrics of Write, reported with the context of a DoFn call: after
// every wait, at the end of every bundle, and at most once a second while
// a bundle runs.
//
//   - dead_letters_published: dead letters Pub/Sub confirmed. Read it
//     against what was offered (the sink's records_dead_lettered, the
//     record view's output); a wait that fails to close a gap fails the
//     bundle, so a gap cannot persist quietly.
//   - dead_letters_in_flight: published and not yet confirmed; after a
//     wait that expired, how many it left unconfirmed.
//   - dead_letter_last_flush_millis: how long the last wait took. Waits
//     climbing towards FlushTimeout say to raise it or to lower
//     MaxInFlightMessages.
//   - dead_letter_flush_millis: every wait, as a distribution; alert on its
//     maximum approaching FlushTimeout.
//   - dead_letter_publisher_shutdowns_abandoned: see shutdownsAbandoned.
var (
	inFlightGauge  = metrics.NewGauge("dead_letters_in_flight")
	lastFlushGauge = metrics.NewGauge("dead_letter_last_flush_millis")
)

// shutdownsAbandoned counts this process's abandoned dead-letter publisher
// stops. They happen in Teardown, which has no metrics context, so the next
// bundle of any writer reports them. It is apart from the sink's
// publisher_shutdowns_abandoned: the two count different publishers.
var shutdownsAbandoned = metrics.NewCounter("dead_letter_publisher_shutdowns_abandoned")

// stats holds one writer's counts.
type stats struct {
	published *metrics.Counter
	flushes   *metrics.Distribution // milliseconds of each wait
	stalled   int64                 // left unconfirmed by the last wait, when it failed
	last      int64                 // milliseconds of the last wait
	nwaits    int64                 // waits so far
	waited    bool                  // a wait happened since the last report
	throttle  metrics.Throttle
}

func newStats() stats {
	return stats{
		published: metrics.NewCounter("dead_letters_published"),
		flushes:   metrics.NewDistribution("dead_letter_flush_millis"),
	}
}

// wait records one wait.
func (s *stats) wait(d time.Duration) {
	ms := d.Milliseconds()
	s.flushes.Add(ms)
	s.last = ms
	s.nwaits++
	s.waited = true
}

// report reports what was counted since the last report and sets the
// gauges; inFlight is what the writer has not seen confirmed.
func (s *stats) report(ctx context.Context, inFlight int) {
	s.published.Report(ctx)
	s.flushes.Report(ctx)
	if s.waited {
		lastFlushGauge.Set(ctx, s.last)
		s.waited = false
	}
	inFlightGauge.Set(ctx, int64(inFlight)+s.stalled)
	shutdownsAbandoned.Report(ctx)
}
