package dlq

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/deferredmetric"
)

// metricsNamespace is shared by every pubsubio metric.
const metricsNamespace = "pubsubio"

// Beam metrics of Write. They are kept in the writer and reported with the
// context of a DoFn call: after every wait, at the end of every bundle, and
// at most once a second while a bundle runs.
//
//   - dead_letters_published: dead letters Pub/Sub confirmed. Read it
//     against what was offered (the sink's records_dead_lettered, the
//     record view's output): a gap the next bundle does not close is a
//     writer falling behind, and it cannot persist quietly, because the
//     wait that fails to close it fails the bundle.
//   - dead_letters_in_flight: published and not yet confirmed; after a
//     wait that expired, how many it left unconfirmed.
//   - dead_letter_last_flush_millis: how long the last wait took, at
//     MaxInFlightMessages or at the end of a bundle. A bundle that had
//     nothing to wait for does not touch it. Waits climbing towards
//     FlushTimeout over several bundles are the warning that FlushTimeout
//     should be raised or MaxInFlightMessages lowered.
//   - dead_letter_flush_millis: every wait, as a distribution; its maximum
//     is the longest wait, which the last-wait gauge overwrites within a
//     bundle (under Synchronous there is a wait per dead letter), and
//     which the runner aggregates across workers. Alert on the maximum
//     approaching FlushTimeout.
//   - dead_letter_publisher_shutdowns_abandoned: see shutdownsAbandoned.
//     It is apart from the sink's publisher_shutdowns_abandoned because
//     the two count different publishers.
var (
	publishedCounter = beam.NewCounter(metricsNamespace, "dead_letters_published")
	inFlightGauge    = beam.NewGauge(metricsNamespace, "dead_letters_in_flight")
	lastFlushGauge   = beam.NewGauge(metricsNamespace, "dead_letter_last_flush_millis")
	flushDist        = beam.NewDistribution(metricsNamespace, "dead_letter_flush_millis")
)

// shutdownsAbandoned counts this process's abandoned dead-letter publisher
// stops, reported by the next bundle of any writer: stops happen in
// Teardown, which has no metrics context (the sink's count works the same
// way, for its own publishers).
var shutdownsAbandoned = deferredmetric.NewCounter(metricsNamespace, "dead_letter_publisher_shutdowns_abandoned")

// stats holds one writer's counts and what it has reported.
type stats struct {
	published int64
	stalled   int64   // left unconfirmed by the last wait, when it failed
	waits     []int64 // milliseconds, not reported yet
	last      int64   // milliseconds of the last wait
	nwaits    int64   // waits so far

	reported   int64 // published, as reported
	lastReport time.Time
}

// waited records one wait.
func (s *stats) waited(d time.Duration) {
	ms := d.Milliseconds()
	s.waits = append(s.waits, ms)
	s.last = ms
	s.nwaits++
}

// maybeReport reports when the last report is a second old.
func (s *stats) maybeReport(ctx context.Context, w *writer) {
	if w.now().Sub(s.lastReport) >= time.Second {
		s.report(ctx, w)
	}
}

// report reports what was counted since the last report and sets the
// gauges.
func (s *stats) report(ctx context.Context, w *writer) {
	s.lastReport = w.now()
	if s.published > s.reported {
		publishedCounter.Inc(ctx, s.published-s.reported)
		s.reported = s.published
	}
	for _, ms := range s.waits {
		flushDist.Update(ctx, ms)
	}
	if len(s.waits) > 0 {
		lastFlushGauge.Set(ctx, s.last)
		s.waits = s.waits[:0]
	}
	inFlightGauge.Set(ctx, int64(len(w.pending))+s.stalled)
	shutdownsAbandoned.Report(ctx)
}
