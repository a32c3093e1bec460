package sink

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/deferredmetric"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// metricsNamespace is shared by every pubsubio metric.
const metricsNamespace = "pubsubio"

// Beam metrics of the write path. Counts happen on the DoFn's goroutine but
// in places (a verdict inside a wait) far from the call's context, so they
// are kept in the writer and flushed into Beam metrics with the context of
// the DoFn call: at the end of every bundle, and at most once a second
// while a bundle runs, so that the gauges show a bundle in progress.
//
//   - records_sent: messages Pub/Sub confirmed; a message republished by a
//     repair counts once, so recovering does not look like more traffic.
//   - bytes_sent: their payload (Data) bytes, not wire bytes.
//   - send_errors: messages that reached the failure policy, whatever it
//     then did; records_dropped and records_dead_lettered split them.
//   - topics_created: repairs that created a topic (ALREADY_EXISTS
//     included: a parallel writer got there first), not distinct topics.
//   - publish_errors_<CODE>: root publish failures by gRPC code. Not
//     counted: the cancellations an ordering key's failure cascades into
//     (they carry no status of their own), and the one status the client
//     sets on every message of a failed batch more than once; a rejection
//     is counted when a message published alone confirms it.
//   - inflight_messages, inflight_bytes, active_publishers: gauges of the
//     writer.
//   - publisher_shutdowns_abandoned: see shutdownsAbandoned.
//   - with PerDestinationMetrics, records_sent.<topic> and
//     bytes_sent.<topic>.
//
// No send latency is reported: the client batches and completes results
// asynchronously, so the writer could only time its own bookkeeping.
var (
	recordsSentCounter    = beam.NewCounter(metricsNamespace, "records_sent")
	bytesSentCounter      = beam.NewCounter(metricsNamespace, "bytes_sent")
	sendErrorsCounter     = beam.NewCounter(metricsNamespace, "send_errors")
	droppedCounter        = beam.NewCounter(metricsNamespace, "records_dropped")
	deadLetteredCounter   = beam.NewCounter(metricsNamespace, "records_dead_lettered")
	topicsCreatedCounter  = beam.NewCounter(metricsNamespace, "topics_created")
	inflightMessagesGauge = beam.NewGauge(metricsNamespace, "inflight_messages")
	inflightBytesGauge    = beam.NewGauge(metricsNamespace, "inflight_bytes")
	activePublishersGauge = beam.NewGauge(metricsNamespace, "active_publishers")
)

// shutdownsAbandoned counts publisher stops abandoned at ShutdownTimeout in
// this process, by any writer. It is process-wide because most happen in
// Teardown, which has no metrics context: a later bundle of any writer in
// the process reports them. Read it as "stops are timing out here", not as
// this step's own residue.
var shutdownsAbandoned = deferredmetric.NewCounter(metricsNamespace, "publisher_shutdowns_abandoned")

// stats holds one writer's cumulative counts and what it has flushed.
type stats struct {
	counts
	errorClasses map[codes.Code]int64
	perDest      map[model.Topic]*[2]int64 // records, bytes
	// cascaded counts ordering-key cancellations parked for repair. It is no
	// metric: a cancellation is not a failure of its own.
	cascaded int64

	flushed struct {
		counts
		errorClasses map[codes.Code]int64
		perDest      map[model.Topic][2]int64
	}
	lastFlush time.Time
}

// counts are the plain counters.
type counts struct {
	records, bytes, sendErrors, dropped, deadLettered, topicsCreated int64
}

func (s *stats) sent(perDest bool, topic model.Topic, p *pending) {
	s.records++
	s.bytes += int64(len(p.msg.Data))
	if perDest {
		if s.perDest == nil {
			s.perDest = map[model.Topic]*[2]int64{}
		}
		c := s.perDest[topic]
		if c == nil {
			c = new([2]int64)
			s.perDest[topic] = c
		}
		c[0]++
		c[1] += int64(len(p.msg.Data))
	}
}

func (s *stats) errorClass(code codes.Code) {
	if s.errorClasses == nil {
		s.errorClasses = map[codes.Code]int64{}
	}
	s.errorClasses[code]++
}

// maybeFlush flushes when the last flush is a second old.
func (s *stats) maybeFlush(ctx context.Context, w *writer) {
	if now := w.now(); now.Sub(s.lastFlush) >= time.Second {
		s.flush(ctx, w)
	}
}

// flush reports what was counted since the last flush, and sets the gauges.
func (s *stats) flush(ctx context.Context, w *writer) {
	s.lastFlush = w.now()
	f := &s.flushed
	inc := func(c beam.Counter, now int64, done *int64) {
		if now > *done {
			c.Inc(ctx, now-*done)
			*done = now
		}
	}
	inc(recordsSentCounter, s.records, &f.records)
	inc(bytesSentCounter, s.bytes, &f.bytes)
	inc(sendErrorsCounter, s.sendErrors, &f.sendErrors)
	inc(droppedCounter, s.dropped, &f.dropped)
	inc(deadLetteredCounter, s.deadLettered, &f.deadLettered)
	inc(topicsCreatedCounter, s.topicsCreated, &f.topicsCreated)
	if f.errorClasses == nil {
		f.errorClasses = map[codes.Code]int64{}
	}
	for code, n := range s.errorClasses {
		done := f.errorClasses[code]
		inc(beam.NewCounter(metricsNamespace, "publish_errors_"+dlq.CodeName(code)), n, &done)
		f.errorClasses[code] = done
	}
	if f.perDest == nil {
		f.perDest = map[model.Topic][2]int64{}
	}
	for topic, c := range s.perDest {
		done := f.perDest[topic]
		inc(beam.NewCounter(metricsNamespace, "records_sent."+topic.String()), c[0], &done[0])
		inc(beam.NewCounter(metricsNamespace, "bytes_sent."+topic.String()), c[1], &done[1])
		f.perDest[topic] = done
	}
	shutdownsAbandoned.Report(ctx)
	inflightMessagesGauge.Set(ctx, int64(w.inflightMsgs))
	inflightBytesGauge.Set(ctx, w.inflightBytes)
	activePublishersGauge.Set(ctx, int64(len(w.dests)))
}
