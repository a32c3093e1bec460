package sink

import (
	"fmt"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
)

// maxConsecutiveRejections bounds MaxConsecutiveRejections: past it, -1
// (no bound) says what is meant.
const maxConsecutiveRejections = 1_000_000_000

// checkLimits bounds the sink's counts and durations, the publisher's
// included: far from what a working pipeline needs, near enough to catch a
// typo or a bare number read as nanoseconds. It runs after defaulting.
func (cfg Config) checkLimits() []error {
	p := cfg.Publisher
	errs := construct.CheckBounds(
		construct.Bound[int]{Option: "MaxInFlightMessages", Value: cfg.MaxInFlightMessages, Min: 1, Max: 1e9},
		// Each publisher holds a batcher and goroutines.
		construct.Bound[int]{Option: "MaxActivePublishers", Value: cfg.MaxActivePublishers, Min: 1, Max: 10000},
		construct.Bound[int]{Option: "MaxGroupedMessages", Value: cfg.MaxGroupedMessages, Min: 1, Max: 1e9},
		construct.Bound[int]{Option: "RecoveryMaxAttempts", Value: cfg.RecoveryMaxAttempts, Min: 1, Max: 1000},
		construct.Bound[int]{Option: "Publisher.NumGoroutines", Value: p.NumGoroutines, Min: 1, Max: 10000, Zero: "for the client's default"},
	)
	errs = append(errs, construct.CheckBounds(
		construct.Bound[int64]{Option: "MaxInFlightBytes", Value: cfg.MaxInFlightBytes, Min: 1, Max: 1 << 40},
	)...)
	errs = append(errs, construct.CheckBounds(
		construct.Bound[time.Duration]{Option: "DestinationIdleTimeout", Value: cfg.DestinationIdleTimeout, Min: time.Second, Max: 24 * time.Hour},
		construct.Bound[time.Duration]{Option: "PublishProgressTimeout", Value: cfg.PublishProgressTimeout, Min: 100 * time.Millisecond, Max: 24 * time.Hour},
		construct.Bound[time.Duration]{Option: "ShutdownTimeout", Value: cfg.ShutdownTimeout, Min: 100 * time.Millisecond, Max: 10 * time.Minute},
		construct.Bound[time.Duration]{Option: "RecoveryInitialBackoff", Value: cfg.RecoveryInitialBackoff, Min: time.Millisecond, Max: 10 * time.Minute},
		construct.Bound[time.Duration]{Option: "RecoveryMaxBackoff", Value: cfg.RecoveryMaxBackoff, Min: time.Millisecond, Max: time.Hour},
		construct.Bound[time.Duration]{Option: "Publisher.DelayThreshold", Value: p.DelayThreshold, Min: time.Millisecond, Max: 24 * time.Hour, Zero: "to hold a batch until it fills or the writer flushes"},
		// The client reads 0 as "no timeout": a publish nothing ends would
		// hold its place under the caps until PublishProgressTimeout fails
		// the bundle, so an unbounded publish is not offered.
		construct.Bound[time.Duration]{Option: "Publisher.Timeout", Value: p.Timeout, Min: 100 * time.Millisecond, Max: 24 * time.Hour},
		construct.Bound[time.Duration]{Option: "Publisher.RetryInitialBackoff", Value: p.RetryInitialBackoff, Min: time.Millisecond, Max: 10 * time.Minute},
		construct.Bound[time.Duration]{Option: "Publisher.RetryMaxBackoff", Value: p.RetryMaxBackoff, Min: time.Millisecond, Max: time.Hour},
	)...)
	if len(errs) > 0 {
		return errs // the cross-checks below assume values in range
	}
	if cfg.RecoveryInitialBackoff > cfg.RecoveryMaxBackoff {
		errs = append(errs, fmt.Errorf("RecoveryInitialBackoff %v must not exceed RecoveryMaxBackoff %v", cfg.RecoveryInitialBackoff, cfg.RecoveryMaxBackoff))
	}
	if p.RetryInitialBackoff > p.RetryMaxBackoff {
		errs = append(errs, fmt.Errorf("Publisher.RetryInitialBackoff %v must not exceed RetryMaxBackoff %v", p.RetryInitialBackoff, p.RetryMaxBackoff))
	}
	if p.Timeout > cfg.PublishProgressTimeout {
		errs = append(errs, fmt.Errorf("Publisher.Timeout %v exceeds PublishProgressTimeout %v: a bundle would fail while the client still retries; lower Publisher.Timeout", p.Timeout, cfg.PublishProgressTimeout))
	}
	return errs
}
