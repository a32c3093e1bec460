package dlq

import (
	"fmt"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Defaults of Write's options; the reasons are on the Config fields.
const (
	DefaultMaxInFlightMessages = 1000
	DefaultFlushTimeout        = 60 * time.Second
	DefaultShutdownTimeout     = 30 * time.Second
)

// Special values of Config.MaxInFlightMessages.
const (
	// Synchronous publishes each dead letter and waits for Pub/Sub to
	// confirm it before taking the next: one round trip per dead letter.
	// (The reference connector spells this 0; here 0 takes the default, as
	// every zero field does.)
	Synchronous = 1
	// FlushAtBundleEnd waits only at the end of each bundle, however many
	// dead letters it holds.
	FlushAtBundleEnd = -1
)

// maxInFlightMessages bounds MaxInFlightMessages: past it, FlushAtBundleEnd
// says what is meant.
const maxInFlightMessages = 1_000_000_000

// Config configures Write. Only Topic is required; every zero field takes
// the default documented on it. Config is validated at graph construction:
// an invalid one never reaches a worker. Its durations are bounded; an error
// names the option, the value and the range.
type Config struct {
	// Topic is the dead-letter topic; it must exist. Write never creates
	// it: a topic created on the fly has no subscription, so what lands
	// there is kept for nobody. A missing topic fails the bundle naming it.
	Topic model.Topic

	// MaxInFlightMessages bounds the dead letters published and not yet
	// confirmed: at it, Write waits for Pub/Sub to confirm all of them.
	// If zero, DefaultMaxInFlightMessages (1,000) is used. Synchronous (1)
	// waits for every dead letter on its own; FlushAtBundleEnd (-1) waits
	// only at the end of the bundle.
	MaxInFlightMessages int

	// FlushTimeout bounds each wait for confirmations, at
	// MaxInFlightMessages and at the end of a bundle; on expiry the bundle
	// fails. If zero, DefaultFlushTimeout (60 s, the client's publish
	// timeout) is used. The client's own publish timeout is twice this, so
	// the wait, not the client, is what expires.
	FlushTimeout time.Duration

	// ShutdownTimeout bounds stopping the publisher at Teardown; a stop that
	// overruns is abandoned and counted in
	// dead_letter_publisher_shutdowns_abandoned. If zero,
	// DefaultShutdownTimeout (30 s) is used.
	ShutdownTimeout time.Duration

	// Connection says where and as whom the dead-letter publisher
	// connects, independently of the pipeline's reads and writes. The zero
	// value is application-default credentials against Pub/Sub.
	Connection connection.Settings
}

// withDefaults returns cfg with every zero field set to its default and the
// whole configuration validated. Errors name the field and the value.
func (cfg Config) withDefaults() (Config, error) {
	construct.Default(&cfg.MaxInFlightMessages, DefaultMaxInFlightMessages)
	construct.Default(&cfg.FlushTimeout, DefaultFlushTimeout)
	construct.Default(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	return cfg, cfg.validate()
}

func (cfg Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cfg.Topic.IsZero() {
		bad("Topic is unset; name the dead-letter topic, which must exist")
	} else if err := cfg.Topic.Validate(); err != nil {
		bad("Topic: %w", err)
	}
	if cfg.MaxInFlightMessages < FlushAtBundleEnd || cfg.MaxInFlightMessages > maxInFlightMessages {
		bad("MaxInFlightMessages %d must be between 1 (%d publishes synchronously) and %d, or %d to wait only at the end of each bundle", cfg.MaxInFlightMessages, Synchronous, maxInFlightMessages, FlushAtBundleEnd)
	}
	// There is no unbounded wait: a duration longer than any disturbance to
	// ride out says the same without making waiting forever a mode. The
	// upper bound keeps the client's timeout, twice FlushTimeout, from
	// overflowing.
	errs = append(errs, construct.CheckBounds(
		construct.Bound[time.Duration]{Option: "FlushTimeout", Value: cfg.FlushTimeout, Min: 100 * time.Millisecond, Max: time.Hour},
		construct.Bound[time.Duration]{Option: "ShutdownTimeout", Value: cfg.ShutdownTimeout, Min: 100 * time.Millisecond, Max: 10 * time.Minute},
	)...)
	if err := cfg.Connection.Validate(); err != nil {
		errs = append(errs, err)
	}
	return construct.Invalid("dlq.Write", errs...)
}
