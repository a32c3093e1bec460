package dedup

import (
	"fmt"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
)

// TimeDomain is the clock Config.Horizon runs on.
type TimeDomain string

const (
	// ProcessingTime remembers a key for Horizon of wall-clock time after
	// its first message, whatever the messages' event times: what a
	// redelivery or a retried publish needs, and what Beam Java's
	// Deduplicate does by default. A runner keeps a bounded job running
	// until its last timer fired: on Prism a bounded read followed by
	// Deduplicate ends Horizon after its last new key.
	ProcessingTime TimeDomain = "PROCESSING_TIME"
	// EventTime remembers a key until the watermark passes its first
	// message's event time plus Horizon. A bounded job ends as soon as its
	// input does (the watermark then jumps to the end of time); a copy that
	// arrives when the watermark is already past its first message's
	// event time plus Horizon passes. A read's watermark catches up with
	// the clock when its subscription is idle, so Horizon must exceed how
	// old the messages are.
	EventTime TimeDomain = "EVENT_TIME"
)

// MissingPolicy says what Deduplicate does with a message that has no key.
type MissingPolicy string

const (
	// MissingPass emits it as it is, undeduplicated, and counts it in
	// dedup_missing_key: nothing is lost for a publisher that forgot the
	// attribute.
	MissingPass MissingPolicy = "PASS"
	// MissingFail fails the bundle naming the message: for pipelines where
	// a message without the attribute means a broken publisher.
	MissingFail MissingPolicy = "FAIL"
)

// DefaultHorizon is used when Config.Horizon is zero: Beam Java's
// Deduplicate default, longer than Pub/Sub's largest ack deadline (10
// min), so a message redelivered after its deadline lapsed is still
// recognised.
const DefaultHorizon = 10 * time.Minute

// Config configures Deduplicate. The zero value deduplicates on Message.ID
// within 10 minutes of processing time.
type Config struct {
	// IDAttribute names the attribute whose value identifies a message: an
	// ID the publisher sets (pubsubio's Write sets one with
	// WriteConfig.IDAttribute), so that copies published twice are
	// recognised. If empty, the key is Message.ID within its Subscription:
	// what Pub/Sub redelivers has the same ID, but a message published
	// twice has two.
	IDAttribute string

	// Horizon is how long a key is remembered (TimeDomain says on which
	// clock): a copy arriving later passes. State is one entry and one
	// timer per key seen within it, so it bounds memory. If zero,
	// DefaultHorizon (10 min) is used; 1 s to 31 days.
	Horizon time.Duration

	// TimeDomain is ProcessingTime (default) or EventTime; see each.
	TimeDomain TimeDomain

	// Missing is what a message without a key (IDAttribute absent, or
	// Message.ID empty) does: MissingPass (default) or MissingFail.
	Missing MissingPolicy
}

// api prefixes every error of this package.
const api = "pubsubio.Deduplicate"

// withDefaults returns cfg with every zero field set to its default and the
// whole configuration validated. Errors name the field and the value.
func (cfg Config) withDefaults() (Config, error) {
	construct.Default(&cfg.Horizon, DefaultHorizon)
	construct.Default(&cfg.TimeDomain, ProcessingTime)
	construct.Default(&cfg.Missing, MissingPass)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := construct.CheckAttribute("IDAttribute", cfg.IDAttribute, "name the attribute holding the ID, or leave it empty for Message.ID"); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, construct.CheckBounds(construct.Bound[time.Duration]{
		Option: "Horizon", Value: cfg.Horizon, Min: time.Second, Max: 31 * 24 * time.Hour,
	})...)
	switch cfg.TimeDomain {
	case ProcessingTime, EventTime:
	default:
		bad("TimeDomain %q is unknown; use %q or %q", cfg.TimeDomain, ProcessingTime, EventTime)
	}
	switch cfg.Missing {
	case MissingPass, MissingFail:
	default:
		bad("Missing %q is unknown; use %q or %q", cfg.Missing, MissingPass, MissingFail)
	}
	return cfg, construct.Invalid(api, errs...)
}
