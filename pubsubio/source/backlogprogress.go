package source

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// What the backlog samples (backlog.go) tell the runner and the operator.
// A split's remaining work is its share of its subscription's backlog
// bytes: the subscription's splits pull from one backlog, so each is given
// an equal part. Bytes, because Dataflow reads an SDF's size as backlog
// bytes when it scales. The tracker's progress counts the bytes the bundle
// claimed as done and the share as remaining; RestrictionSize reports the
// share for the residual the runner schedules next. Without a sample
// (sampling off, not answered yet, Monitoring without a point) both
// report one unit, as before: a stream's remaining work is unknown, and 0
// would say the split is finished. The gauges report each subscription's
// latest sample as Cloud Monitoring measured it.

// The process's backlog counters, reported by every bundle of every read
// (the sampler is shared by the reads of a process).
var (
	backlogSamples                = metrics.NewCounter("backlog_samples")
	backlogSamplesEmpty           = metrics.NewCounter("backlog_samples_empty")
	backlogSampleFailures         = metrics.NewCounter("backlog_sample_failures")
	watermarkBacklogHolds         = metrics.NewCounter("watermark_backlog_holds")
	watermarkBacklogHoldsReleased = metrics.NewCounter("watermark_backlog_holds_released")

	backlogCounters = []*metrics.Counter{backlogSamples, backlogSamplesEmpty, backlogSampleFailures, watermarkBacklogHolds, watermarkBacklogHoldsReleased}
)

// backlogGauges are one subscription's gauges, named after it as the
// sink's per-topic counters are.
type backlogGauges struct {
	messages, bytes, oldestAgeMillis beam.Gauge
}

func backlogGaugesOf(sub model.Subscription) backlogGauges {
	return backlogGauges{
		messages:        metrics.NewGauge("backlog_messages." + sub.String()),
		bytes:           metrics.NewGauge("backlog_bytes." + sub.String()),
		oldestAgeMillis: metrics.NewGauge("oldest_unacked_age_ms." + sub.String()),
	}
}

// reportBacklog reports the backlog counters and, if the read samples,
// the split's subscription's latest sample into its gauges.
func (r *splitReader) reportBacklog(ctx context.Context) {
	for _, c := range backlogCounters {
		c.Report(ctx)
	}
	if r.backlog == nil {
		return
	}
	sample, ok := r.backlog.latest()
	if !ok {
		return
	}
	g := r.backlog.gauges
	if sample.Messages.Known() {
		g.messages.Set(ctx, sample.Messages.Value)
	}
	if sample.Bytes.Known() {
		g.bytes.Set(ctx, sample.Bytes.Value)
	}
	if sample.OldestAge.Known() {
		g.oldestAgeMillis.Set(ctx, sample.OldestAge.Value*1000)
	}
}
