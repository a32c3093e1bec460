package flinkjob

import (
	"context"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
)

// The watchers' counts, process-wide: what each poll of the REST API met.
var (
	pollFailures    = metrics.NewCounter("checkpoint_poll_failures") // polls that did not read the job's checkpoints
	restUnavailable = metrics.NewCounter("flink_rest_unavailable")   // answers of 5xx
	restTimeouts    = metrics.NewCounter("flink_rest_timeouts")      // requests not answered within their timeout
	restUnreachable = metrics.NewCounter("flink_rest_unreachable")   // requests that found no connection, or lost it
	jobLookups      = metrics.NewCounter("flink_job_lookups")        // the job looked up by name again after its ID stopped answering
	restoresSeen    = metrics.NewCounter("flink_restores_seen")      // restores that voided what waited for a checkpoint
)

// Report reports the watchers' counts into Beam metrics with a DoFn call's
// context.
func Report(ctx context.Context) {
	for _, c := range []*metrics.Counter{pollFailures, restUnavailable, restTimeouts, restUnreachable, jobLookups, restoresSeen} {
		c.Report(ctx)
	}
}
