package sink

import (
	"context"

	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Beam metrics of the write path, reported with the context of the DoFn
// call: at the end of every bundle, and at most once a second while a
// bundle runs, so that the gauges show a bundle in progress.
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
//     sets on every message of a failed batch more than once.
//   - inflight_messages, inflight_bytes, active_publishers: gauges of the
//     writer; the in-flight ones count what the caps count, messages
//     waiting in groups (grouping.go) included.
//   - publisher_shutdowns_abandoned: see shutdownsAbandoned.
//   - with PerDestinationMetrics, records_sent.<topic> and
//     bytes_sent.<topic>.
//
// No send latency is reported: the client batches and completes results
// asynchronously, so the writer could only time its own bookkeeping.
var (
	inflightMessagesGauge = metrics.NewGauge("inflight_messages")
	inflightBytesGauge    = metrics.NewGauge("inflight_bytes")
	activePublishersGauge = metrics.NewGauge("active_publishers")
)

// shutdownsAbandoned counts publisher stops abandoned at ShutdownTimeout in
// this process, by any writer. Most happen in Teardown, which has no
// metrics context, so a later bundle of any writer reports them: read it
// as "stops are timing out here", not as this step's own residue.
var shutdownsAbandoned = metrics.NewCounter("publisher_shutdowns_abandoned")

// stats holds one writer's counts.
type stats struct {
	records, bytes, sendErrors, dropped, deadLettered, topicsCreated *metrics.Counter
	// byName are the counters named by an error code or a topic.
	byName metrics.Counters
	// cascaded counts ordering-key cancellations parked for repair. It is no
	// metric: a cancellation is not a failure of its own.
	cascaded int64
	throttle metrics.Throttle
}

func newStats() stats {
	return stats{
		records:       metrics.NewCounter("records_sent"),
		bytes:         metrics.NewCounter("bytes_sent"),
		sendErrors:    metrics.NewCounter("send_errors"),
		dropped:       metrics.NewCounter("records_dropped"),
		deadLettered:  metrics.NewCounter("records_dead_lettered"),
		topicsCreated: metrics.NewCounter("topics_created"),
	}
}

func (s *stats) sent(perDest bool, topic model.Topic, o *outbound) {
	s.records.Add(1)
	s.bytes.Add(int64(len(o.msg.Data)))
	if perDest {
		s.byName.Add("records_sent."+topic.String(), 1)
		s.byName.Add("bytes_sent."+topic.String(), int64(len(o.msg.Data)))
	}
}

// errorClassName is the counter of root publish failures with code.
func errorClassName(code codes.Code) string { return "publish_errors_" + grpccode.Name(code) }

func (s *stats) errorClass(code codes.Code) { s.byName.Add(errorClassName(code), 1) }

// report reports what was counted since the last report, and sets the
// gauges.
func (s *stats) report(ctx context.Context, w *writer) {
	for _, c := range []*metrics.Counter{s.records, s.bytes, s.sendErrors, s.dropped, s.deadLettered, s.topicsCreated, shutdownsAbandoned} {
		c.Report(ctx)
	}
	s.byName.Report(ctx)
	tracing.Report(ctx)
	msgs, bytes := w.accepted()
	inflightMessagesGauge.Set(ctx, int64(msgs))
	inflightBytesGauge.Set(ctx, bytes)
	activePublishersGauge.Set(ctx, int64(len(w.dests)))
}
