package dlq

import (
	"errors"
	"fmt"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
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
	// confirm it before taking the next: the narrowest loss window, one
	// round trip per dead letter.
	Synchronous = 1
	// FlushAtBundleEnd waits only at the end of each bundle, however many
	// dead letters it holds.
	FlushAtBundleEnd = -1
)

// Config configures Write. Only Topic is required; every zero field takes
// the default documented on it. Config is validated at graph construction:
// an invalid one never reaches a worker.
type Config struct {
	// Topic is the dead-letter topic. It must exist: Write never creates
	// it, because a dead-letter topic created on the fly has no
	// subscription, so what is published there is kept for nobody. A
	// missing topic fails the bundle with an error naming it.
	Topic model.Topic

	// MaxInFlightMessages bounds the dead letters published and not yet
	// confirmed (default 1,000): when a bundle reaches it, Write waits for
	// Pub/Sub to confirm all of them before taking the next. It bounds what
	// one bundle holds when every record fails; the end of the bundle waits
	// for the rest. Synchronous (1) waits for every dead letter on its own
	// (the reference connector spells this 0; here 0 takes the default, as
	// every zero field does, and with one wait per dead letter 1 means the
	// same). FlushAtBundleEnd (-1) waits only at the end of the bundle,
	// so only the bundle bounds what is held.
	MaxInFlightMessages int

	// FlushTimeout bounds each wait for confirmations, at
	// MaxInFlightMessages and at the end of a bundle (default 60 s, the
	// client's default publish timeout: a default wait lasts about as long
	// as one publish's retries would). One deadline covers all of a wait's
	// dead letters. On expiry the bundle fails (a runner that retries bundles
	// retries it; Prism fails the job); the publishes are not cancelled, so
	// a retried bundle or a rerun job may publish some dead letters twice
	// (consume the topic idempotently). The client's publish timeout,
	// retries included, is twice FlushTimeout: long enough that the wait,
	// not the client, is what expires, bounded so that an abandoned publish
	// does not linger. Sizing: a wait at the cap carries
	// MaxInFlightMessages dead letters; keep FlushTimeout well under
	// whatever bounds a bundle on your runner.
	FlushTimeout time.Duration

	// ShutdownTimeout bounds stopping the publisher at Teardown (default
	// 30 s): the client's Stop waits for every batch it still holds, which
	// through an outage lasts until the publish timeout. A stop that
	// overruns is abandoned, logged and counted
	// (dead_letter_publisher_shutdowns_abandoned).
	ShutdownTimeout time.Duration

	// Connection says where and as whom the dead-letter publisher connects,
	// independently of any Read or Write in the pipeline: EmulatorEndpoint
	// (host:port, plaintext, no credentials) or CredentialsFile (a
	// service-account key path read on the worker); neither means
	// application-default credentials against Pub/Sub, even when the sink
	// whose failures these are uses a key file.
	Connection connection.Settings
}

// withDefaults returns cfg with every zero field set to its default and the
// whole configuration validated. Errors name the field and the value.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.MaxInFlightMessages == 0 {
		cfg.MaxInFlightMessages = DefaultMaxInFlightMessages
	}
	if cfg.FlushTimeout == 0 {
		cfg.FlushTimeout = DefaultFlushTimeout
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
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
	if cfg.MaxInFlightMessages < FlushAtBundleEnd {
		bad("MaxInFlightMessages %d must be positive (%d publishes synchronously), or %d to wait only at the end of each bundle", cfg.MaxInFlightMessages, Synchronous, FlushAtBundleEnd)
	}
	// There is no unbounded wait: a duration longer than any disturbance to
	// ride out says the same without making waiting forever a mode.
	if cfg.FlushTimeout <= 0 {
		bad("FlushTimeout %v must be positive", cfg.FlushTimeout)
	}
	if cfg.ShutdownTimeout <= 0 {
		bad("ShutdownTimeout %v must be positive", cfg.ShutdownTimeout)
	}
	if err := cfg.Connection.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dlq.Write: invalid configuration: %w", err)
	}
	return nil
}
