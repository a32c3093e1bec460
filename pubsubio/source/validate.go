package source

import (
	"fmt"
	"slices"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

// Construction's checks of a Config: defaults, validation and warnings,
// each naming the option and the value. Read runs them once, through
// newReadPlan (plan.go), before anything reaches a worker.

// withDefaults returns cfg with every zero field set to its default, its
// Topics moved into Subscriptions and Setup (prepare.WithTopics) and the
// whole configuration validated, and the subscriptions it creates for its
// topics. Errors name the field and the value.
func (cfg Config) withDefaults() (Config, prepare.Owned, error) {
	construct.Default(&cfg.Ordering, OrderingNone)
	construct.Default(&cfg.Finalization, FinalizationAuto)
	construct.Default(&cfg.Commit, CommitAuto)
	construct.Default(&cfg.Format, model.FormatBytes)
	construct.Default(&cfg.DecodePolicy, model.DecodeFail)
	construct.Default(&cfg.Splits, 1)
	construct.Default(&cfg.MaxExtension, DefaultMaxExtension)
	construct.Default(&cfg.ParallelPullCount, DefaultParallelPullCount)
	construct.Default(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	construct.Default(&cfg.MaxRecordsPerBundle, DefaultMaxRecordsPerBundle)
	construct.Default(&cfg.BufferMaxMessages, DefaultBufferMaxMessages)
	construct.Default(&cfg.BufferMaxBytes, DefaultBufferMaxBytes)
	construct.Default(&cfg.LeaseIdle, DefaultLeaseIdle)
	construct.Default(&cfg.PollDelay, DefaultPollDelay)
	construct.Default(&cfg.WatermarkWindow, DefaultWatermarkWindow)
	construct.Default(&cfg.WatermarkIdle, DefaultWatermarkIdle)
	construct.Default(&cfg.WatermarkLateness, DefaultWatermarkLateness)
	construct.Default(&cfg.WatermarkMaxOutage, DefaultWatermarkMaxOutage)
	construct.Default(&cfg.LatePolicy, LateEmit)
	construct.Default(&cfg.Backlog, BacklogAuto)
	construct.Default(&cfg.Flink.Patience, DefaultFlinkPatience)
	owned, setup, topicErrs := prepare.WithTopics(cfg.Topics, cfg.TopicSubscriptions, cfg.Subscriptions, cfg.requirements())
	if len(topicErrs) == 0 {
		cfg.Subscriptions = slices.Concat(cfg.Subscriptions, owned.Subscriptions)
		cfg.Setup = slices.Concat(cfg.Setup, setup)
		cfg.Topics, cfg.TopicSubscriptions = nil, TopicSubscriptionOptions{}
	}
	cfg.Setup = prepare.SetupWithDefaults(cfg.Setup)
	cfg.flowControlFromBudget()
	return cfg, owned, cfg.validate(topicErrs)
}

// validate checks cfg; errs are problems already found.
func (cfg Config) validate(errs []error) error {
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if len(cfg.Subscriptions) == 0 && len(cfg.Topics) == 0 {
		bad("Subscriptions and Topics are both empty: name at least one subscription or topic to read")
	}
	construct.UniqueValid("Subscriptions", "subscription", cfg.Subscriptions, bad)
	switch cfg.Ordering {
	case OrderingNone:
	case OrderingPerKey:
		if cfg.ParallelPullCount != 1 {
			bad("ParallelPullCount %d cannot be combined with Ordering %s: a second streaming-pull stream breaks per-key order; leave it at 1", cfg.ParallelPullCount, OrderingPerKey)
		}
		if cfg.Splits != 1 {
			bad("Splits %d cannot be combined with Ordering %s: each subscription is read by exactly one split; leave Splits unset", cfg.Splits, OrderingPerKey)
		}
	default:
		bad("Ordering %q is unknown; use %q or %q", text.Truncate(string(cfg.Ordering), text.MaxQuoted), OrderingNone, OrderingPerKey)
	}
	switch cfg.Finalization {
	case FinalizationAuto, FinalizationOn, FinalizationOff:
	default:
		bad("Finalization %q is unknown; use %q, %q or %q", text.Truncate(string(cfg.Finalization), text.MaxQuoted), FinalizationAuto, FinalizationOn, FinalizationOff)
	}
	if err := cfg.Format.Validate(); err != nil {
		bad("Format: %w", err)
	}
	switch cfg.DecodePolicy {
	case model.DecodeFail, model.DecodeDrop, model.DecodeNack, model.DecodeDeadLetter:
	default:
		bad("DecodePolicy %q is unknown; use %q, %q, %q or %q", text.Truncate(string(cfg.DecodePolicy), text.MaxQuoted), model.DecodeFail, model.DecodeDrop, model.DecodeNack, model.DecodeDeadLetter)
	}
	switch cfg.Commit {
	case CommitAuto, CommitResume, CommitFlinkCheckpoint:
	default:
		bad("Commit %q is unknown; use %q, %q or %q", text.Truncate(string(cfg.Commit), text.MaxQuoted), CommitAuto, CommitResume, CommitFlinkCheckpoint)
	}
	switch cfg.LatePolicy {
	case LateEmit, LateDeadLetter:
	default:
		bad("LatePolicy %q is unknown; use %q or %q", text.Truncate(string(cfg.LatePolicy), text.MaxQuoted), LateEmit, LateDeadLetter)
	}
	errs = append(errs, cfg.checkLimits()...)
	// A name Pub/Sub refuses as an attribute key is on no message, so
	// every message would silently keep its publish time.
	if err := construct.CheckAttribute("TimestampAttribute", cfg.TimestampAttribute, "name the attribute holding the event time, or leave it empty for publish times"); err != nil {
		errs = append(errs, err)
	}
	if cfg.MaxOutstandingMessages < -1 || cfg.MaxOutstandingMessages > maxOutstandingMessages {
		bad("MaxOutstandingMessages %d must be between 1 and %d, or -1 for no limit", cfg.MaxOutstandingMessages, maxOutstandingMessages)
	}
	if cfg.MaxOutstandingBytes < -1 || cfg.MaxOutstandingBytes > maxOutstandingBytes {
		bad("MaxOutstandingBytes %d must be between 1 and %d, or -1 for no limit", cfg.MaxOutstandingBytes, maxOutstandingBytes)
	}
	if cfg.MaxMessages < 0 {
		bad("MaxMessages %d must not be negative (0 reads without a count limit)", cfg.MaxMessages)
	}
	errs = append(errs, prepare.ValidateSetup(cfg.Setup, cfg.Subscriptions, cfg.requirements())...)
	errs = append(errs, cfg.validateBacklog()...)
	if err := cfg.Connection.Validate(); err != nil {
		errs = append(errs, err)
	}
	return construct.Invalid("pubsubio.Read", errs...)
}

// warnings explains settings that are valid but probably not meant; read
// logs them at construction. now is the construction time.
func (cfg Config) warnings(now time.Time) []string {
	return slices.Concat(prepare.SetupWarnings(cfg.Setup, now), cfg.budgetWarnings(), cfg.holdWarnings())
}

// validateBacklog checks Backlog against Connection.
func (cfg Config) validateBacklog() []error {
	switch cfg.Backlog {
	case BacklogAuto:
		return nil
	case BacklogOff:
		if cfg.Connection.MonitoringEndpoint != "" {
			return []error{fmt.Errorf("Connection.MonitoringEndpoint %q is set but Backlog is %s, so nothing would ask it: leave MonitoringEndpoint empty, or Backlog unset to sample the backlog",
				cfg.Connection.MonitoringEndpoint, BacklogOff)}
		}
		return nil
	}
	return []error{fmt.Errorf("unknown Backlog %q: use %q (sample the backlog) or %q (never)", text.Truncate(string(cfg.Backlog), text.MaxQuoted), BacklogAuto, BacklogOff)}
}
