package source

import (
	"fmt"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
)

// maxStreams bounds the streaming pulls one read opens: max(len(Subscriptions),
// Splits) x ParallelPullCount. A thousand streams carry about 10 GB/s; past
// that, a typo (Splits: 1 << 30) would exhaust memory building the graph, or
// build one larger than a runner accepts, before any message is read.
const maxStreams = 1000

// maxOutstandingMessages and maxOutstandingBytes bound a stream's flow
// control: far above what one stream carries unacked (10 MB/s for the
// minutes before a commit), low enough that splits x streams x the limit
// cannot overflow.
const (
	maxOutstandingMessages = 10_000_000
	maxOutstandingBytes    = 1 << 40
)

// pollsPerIdle is how many PollDelays LeaseIdle and IdleTimeout must span,
// so that a split polled on schedule is never taken for an idle one.
const pollsPerIdle = 10

// checkLimits bounds every count and duration: far from what a working
// pipeline needs, near enough to catch a typo or a bare number read as
// nanoseconds. It runs after defaulting.
func (cfg Config) checkLimits() []error {
	errs := construct.CheckBounds(
		construct.Bound[int]{Option: "Splits", Value: cfg.Splits, Min: 1, Max: maxStreams},
		construct.Bound[int]{Option: "ParallelPullCount", Value: cfg.ParallelPullCount, Min: 1, Max: maxStreams},
		construct.Bound[int]{Option: "MaxRecordsPerBundle", Value: cfg.MaxRecordsPerBundle, Min: 1, Max: 1e9},
		construct.Bound[int]{Option: "BufferMaxMessages", Value: cfg.BufferMaxMessages, Min: 1, Max: 1e9},
	)
	errs = append(errs, construct.CheckBounds(
		construct.Bound[int64]{Option: "BufferMaxBytes", Value: cfg.BufferMaxBytes, Min: 1, Max: 1 << 40},
	)...)
	errs = append(errs, construct.CheckBounds(
		construct.Bound[time.Duration]{Option: "MaxExtension", Value: cfg.MaxExtension, Min: 10 * time.Second, Max: 24 * time.Hour},
		construct.Bound[time.Duration]{Option: "MaxDurationPerAckExtension", Value: cfg.MaxDurationPerAckExtension, Min: 10 * time.Second, Max: 600 * time.Second, Zero: "for the client's adaptive extension"},
		construct.Bound[time.Duration]{Option: "ShutdownTimeout", Value: cfg.ShutdownTimeout, Min: 100 * time.Millisecond, Max: 10 * time.Minute},
		construct.Bound[time.Duration]{Option: "LeaseIdle", Value: cfg.LeaseIdle, Min: time.Second, Max: time.Hour},
		construct.Bound[time.Duration]{Option: "PollDelay", Value: cfg.PollDelay, Min: time.Millisecond, Max: time.Minute},
		construct.Bound[time.Duration]{Option: "IdleTimeout", Value: cfg.IdleTimeout, Min: time.Second, Max: 24 * time.Hour, Zero: "for no idle bound"},
		construct.Bound[time.Duration]{Option: "WatermarkWindow", Value: cfg.WatermarkWindow, Min: time.Second, Max: 24 * time.Hour},
		construct.Bound[time.Duration]{Option: "WatermarkIdle", Value: cfg.WatermarkIdle, Min: 100 * time.Millisecond, Max: time.Hour},
		construct.Bound[time.Duration]{Option: "WatermarkLateness", Value: cfg.WatermarkLateness, Min: time.Millisecond, Max: 24 * time.Hour},
		construct.Bound[time.Duration]{Option: "WatermarkMaxOutage", Value: cfg.WatermarkMaxOutage, Min: time.Second, Max: 24 * time.Hour},
		construct.Bound[time.Duration]{Option: "Flink.Patience", Value: cfg.Flink.Patience, Min: time.Second, Max: 24 * time.Hour},
	)...)
	if len(errs) > 0 {
		return errs // the cross-checks below assume values in range
	}
	if streams := max(len(cfg.Subscriptions), cfg.Splits) * cfg.ParallelPullCount; streams > maxStreams {
		errs = append(errs, fmt.Errorf("max(len(Subscriptions) %d, Splits %d) x ParallelPullCount %d is %d streaming pulls, over %d; lower Splits or ParallelPullCount, or use several reads",
			len(cfg.Subscriptions), cfg.Splits, cfg.ParallelPullCount, streams, maxStreams))
	}
	if cfg.LeaseIdle < pollsPerIdle*cfg.PollDelay {
		errs = append(errs, fmt.Errorf("LeaseIdle %v is under %d x PollDelay %v, so a split could be released between polls; raise LeaseIdle or lower PollDelay", cfg.LeaseIdle, pollsPerIdle, cfg.PollDelay))
	}
	if cfg.WatermarkIdle < pollsPerIdle*cfg.PollDelay {
		errs = append(errs, fmt.Errorf("WatermarkIdle %v is under %d x PollDelay %v, so a busy split could look idle between polls; raise WatermarkIdle or lower PollDelay", cfg.WatermarkIdle, pollsPerIdle, cfg.PollDelay))
	}
	if cfg.MaxDurationPerAckExtension > cfg.MaxExtension {
		errs = append(errs, fmt.Errorf("MaxDurationPerAckExtension %v exceeds MaxExtension %v, which caps every extension; raise MaxExtension or lower MaxDurationPerAckExtension", cfg.MaxDurationPerAckExtension, cfg.MaxExtension))
	}
	if cfg.IdleTimeout != 0 && cfg.IdleTimeout < pollsPerIdle*cfg.PollDelay {
		errs = append(errs, fmt.Errorf("IdleTimeout %v is under %d x PollDelay %v, so the read could end between polls; raise IdleTimeout or lower PollDelay", cfg.IdleTimeout, pollsPerIdle, cfg.PollDelay))
	}
	return errs
}
