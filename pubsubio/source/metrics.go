package source

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// metricsNamespace is shared by every pubsubio metric.
const metricsNamespace = "pubsubio"

// counter names one process-wide count of a read. Most of these happen on
// the client's goroutines or the janitor, where there is no DoFn context, so
// they are counted here and flushed into Beam metrics by ProcessElement.
type counter int

const (
	messagesReceived counter = iota
	messagesEmitted
	messagesAcked
	nackedBudget      // a delivery that would have crossed the buffer budget
	nackedRelease     // held by a split released for lease idleness or teardown
	nackedShutdown    // arrived while its subscriber was stopping
	nackedSuperseded  // a stale handle replaced by a redelivery of the same message
	nackedUncommitted // emitted by a bundle that failed or was retried
	nackedDecode      // failed to decode under DecodeNack
	acksFinalization  // acks sent from a bundle-finalization callback
	acksResume        // acks sent by the next bundle of the split
	acksRPC           // acks sent with the Acknowledge RPC (residual resumed elsewhere)
	ackRPCFailures
	nackRPCFailures
	subscriberRestarts
	shutdownsAbandoned
	failuresAbsorbed // subscriber errors raised during a release, reported nowhere else
	decodeFailures
	numCounters
)

var counterNames = [numCounters]string{
	messagesReceived:   "messages_received",
	messagesEmitted:    "messages_emitted",
	messagesAcked:      "messages_acked",
	nackedBudget:       "messages_nacked_budget",
	nackedRelease:      "messages_nacked_release",
	nackedShutdown:     "messages_nacked_shutdown",
	nackedSuperseded:   "messages_nacked_superseded",
	nackedUncommitted:  "messages_nacked_uncommitted",
	nackedDecode:       "messages_nacked_decode",
	acksFinalization:   "acks_via_finalization",
	acksResume:         "acks_via_resume",
	acksRPC:            "acks_via_rpc",
	ackRPCFailures:     "ack_rpc_failures",
	nackRPCFailures:    "nack_rpc_failures",
	subscriberRestarts: "subscriber_restarts",
	shutdownsAbandoned: "subscriber_shutdowns_abandoned",
	failuresAbsorbed:   "subscriber_failures_absorbed",
	decodeFailures:     "decode_failures",
}

var (
	beamCounters [numCounters]beam.Counter

	bufferedMessagesGauge = beam.NewGauge(metricsNamespace, "buffered_messages")
	bufferedBytesGauge    = beam.NewGauge(metricsNamespace, "buffered_bytes")
	pendingAcksGauge      = beam.NewGauge(metricsNamespace, "pending_acks")
)

func init() {
	for i, name := range counterNames {
		beamCounters[i] = beam.NewCounter(metricsNamespace, name)
	}
}

// stats holds one read's process-wide counts.
type stats struct {
	counts      [numCounters]atomic.Int64
	pendingAcks atomic.Int64 // emitted, not yet acked or given back

	mu      sync.Mutex
	flushed [numCounters]int64
}

func (s *stats) add(c counter, n int) {
	if n != 0 {
		s.counts[c].Add(int64(n))
	}
}

func (s *stats) get(c counter) int64 { return s.counts[c].Load() }

// flush reports into Beam metrics what was counted since the last flush by
// any DoFn instance of this process, and samples the gauges.
func (s *stats) flush(ctx context.Context, b *budget) {
	s.mu.Lock()
	for i := range s.counts {
		now := s.counts[i].Load()
		if d := now - s.flushed[i]; d > 0 {
			beamCounters[i].Inc(ctx, d)
			s.flushed[i] = now
		}
	}
	s.mu.Unlock()
	msgs, bytes := b.usage()
	bufferedMessagesGauge.Set(ctx, int64(msgs))
	bufferedBytesGauge.Set(ctx, bytes)
	pendingAcksGauge.Set(ctx, s.pendingAcks.Load())
}

// The prepare step's counters. It runs once per job in a DoFn, so it
// counts straight into Beam metrics with its context.
var (
	subscriptionsCreatedCounter = beam.NewCounter(metricsNamespace, "subscriptions_created")
	seeksPerformedCounter       = beam.NewCounter(metricsNamespace, "seeks_performed")
	checksRejectedCounter       = beam.NewCounter(metricsNamespace, "checks_rejected")
	checksWarnedCounter         = beam.NewCounter(metricsNamespace, "checks_warned")
)

// report adds what one prepare run did to the job's metrics.
func (c prepareCounts) report(ctx context.Context) {
	for _, m := range []struct {
		counter beam.Counter
		n       int
	}{
		{subscriptionsCreatedCounter, c.created},
		{seeksPerformedCounter, c.seeks},
		{checksRejectedCounter, c.rejected},
		{checksWarnedCounter, c.warned},
	} {
		if m.n > 0 {
			m.counter.Inc(ctx, int64(m.n))
		}
	}
}
