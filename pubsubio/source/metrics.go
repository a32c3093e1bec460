package source

import (
	"context"
	"sync/atomic"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
)

// counter names one process-wide count of a read. Most of these happen on
// the client's goroutines or the janitor, where there is no DoFn context, so
// they are counted here and reported into Beam metrics by each bundle.
type counter int

const (
	messagesReceived counter = iota
	messagesEmitted
	messagesAcked
	nackedBudget        // a delivery that would have crossed the buffer budget
	nackedRelease       // held by a split released for lease idleness, teardown or a stopped worker
	nackedShutdown      // arrived while its subscriber was stopping
	nackedSuperseded    // a stale handle replaced by a redelivery of the same message
	nackedUncommitted   // emitted by a bundle that failed or was retried
	nackedDecode        // failed to decode under DecodeNack
	nackedHold          // held for MaxExtension without a commit (holds.go)
	messagesRequeued    // emitted by a bundle that failed or was retried, kept for the retry
	messagesRedelivered // received again by the read, or with a delivery attempt over 1
	acksFinalization    // acks sent from a bundle-finalization callback
	acksResume          // acks sent by the next bundle of the split
	acksCheckpoint      // acks sent once a completed Flink checkpoint covered them
	acksRPC             // acks sent with the Acknowledge RPC (residual resumed elsewhere)
	acksConfirmed       // exactly-once acks Pub/Sub confirmed (exactlyonce.go)
	acksUnconfirmed     // exactly-once acks not answered within Connection.RPCTimeout
	ackRPCFailures
	nackRPCFailures
	subscriberRestarts
	shutdownsAbandoned
	failuresAbsorbed // subscriber errors raised during a release, reported nowhere else
	decodeFailures
	lateMessages                // emitted behind the watermark the split had reported
	watermarkOutages            // streams seen failing, each holding the watermark
	watermarkOutagesReleased    // outages that outlasted WatermarkMaxOutage
	watermarkSkippedUnestimated // splits left out of the read's watermark for having no estimate
	watermarkSkippedStale       // splits left out of the read's watermark for not being polled
	givenBackUntracked          // given back past maxGivenBack: they do not hold the watermark
	givenBackUnseen             // given back and not seen again within WatermarkWindow
	numCounters
)

var counterNames = [numCounters]string{
	messagesReceived:    "messages_received",
	messagesEmitted:     "messages_emitted",
	messagesAcked:       "messages_acked",
	nackedBudget:        "messages_nacked_budget",
	nackedRelease:       "messages_nacked_release",
	nackedShutdown:      "messages_nacked_shutdown",
	nackedSuperseded:    "messages_nacked_superseded",
	nackedUncommitted:   "messages_nacked_uncommitted",
	nackedDecode:        "messages_nacked_decode",
	nackedHold:          "messages_nacked_hold",
	messagesRequeued:    "messages_requeued",
	messagesRedelivered: "messages_redelivered",
	acksFinalization:    "acks_via_finalization",
	acksResume:          "acks_via_resume",
	acksCheckpoint:      "acks_via_checkpoint",
	acksRPC:             "acks_via_rpc",
	acksConfirmed:       "acks_confirmed",
	acksUnconfirmed:     "acks_unconfirmed",
	ackRPCFailures:      "ack_rpc_failures",
	nackRPCFailures:     "nack_rpc_failures",
	subscriberRestarts:  "subscriber_restarts",
	shutdownsAbandoned:  "subscriber_shutdowns_abandoned",
	failuresAbsorbed:    "subscriber_failures_absorbed",
	decodeFailures:      "decode_failures",

	lateMessages:                "late_messages",
	watermarkOutages:            "watermark_outages",
	watermarkOutagesReleased:    "watermark_outages_released",
	watermarkSkippedUnestimated: "watermark_splits_skipped_unestimated",
	watermarkSkippedStale:       "watermark_splits_skipped_stale",
	givenBackUntracked:          "given_back_untracked",
	givenBackUnseen:             "given_back_unseen",
}

var (
	bufferedMessagesGauge = metrics.NewGauge("buffered_messages")
	bufferedBytesGauge    = metrics.NewGauge("buffered_bytes")
	pendingAcksGauge      = metrics.NewGauge("pending_acks")
)

// stats holds one read's process-wide counts.
type stats struct {
	counts      [numCounters]*metrics.Counter
	failedAcks  metrics.Counters // exactly-once acks Pub/Sub refused, by code (failedAcksName)
	pendingAcks atomic.Int64     // emitted, not yet acked or given back
	// attempts are the delivery attempts Pub/Sub reported (only with a
	// dead-letter policy).
	attempts *metrics.Distribution
}

func newStats() *stats {
	s := &stats{attempts: metrics.NewDistribution("delivery_attempts")}
	for i, name := range counterNames {
		s.counts[i] = metrics.NewCounter(name)
	}
	return s
}

func (s *stats) add(c counter, n int) { s.counts[c].Add(int64(n)) }

func (s *stats) get(c counter) int64 { return s.counts[c].Load() }

// flush reports into Beam metrics what was counted since the last flush by
// any DoFn instance of this process, and samples the gauges.
func (s *stats) flush(ctx context.Context, b *budget) {
	for _, c := range s.counts {
		c.Report(ctx)
	}
	flinkjob.Report(ctx)
	tracing.Report(ctx)
	s.failedAcks.Report(ctx)
	s.attempts.Report(ctx)
	msgs, bytes := b.usage()
	bufferedMessagesGauge.Set(ctx, int64(msgs))
	bufferedBytesGauge.Set(ctx, bytes)
	pendingAcksGauge.Set(ctx, s.pendingAcks.Load())
}
