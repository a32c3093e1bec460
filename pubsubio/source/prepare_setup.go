package source

import (
	"fmt"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// SubscriptionSetup is what the prepare step does for one subscription
// before it is read: create it when it is missing, and where to start. It
// lives beside Config.Subscriptions rather than in it, so a read of
// existing subscriptions from where they are needs none of it.
type SubscriptionSetup struct {
	// Subscription is the subscription this is for; it must be listed in
	// Config.Subscriptions.
	Subscription model.Subscription
	// Create, when set, authorises creating the subscription if it does not
	// exist, with these settings (Topic required). Unset, a missing
	// subscription fails the job.
	Create SubscriptionCreateOptions
	// Start is where the read starts (default: resume where the
	// subscription is). See StartPosition: a seek is shared state on the
	// subscription and runs once per job.
	Start StartPosition
}

// setupFor returns the setup of sub; the zero value (must exist, resume)
// when it has none.
func (cfg Config) setupFor(sub model.Subscription) SubscriptionSetup {
	for _, s := range cfg.Setup {
		if s.Subscription == sub {
			return s
		}
	}
	return SubscriptionSetup{Subscription: sub, Start: StartPosition{Kind: PositionResume}}
}

// setupWithDefaults reads an empty start position as PositionResume.
func (cfg *Config) setupWithDefaults() {
	if cfg.Setup == nil {
		return
	}
	setup := make([]SubscriptionSetup, len(cfg.Setup)) // never the caller's array
	for i, s := range cfg.Setup {
		s.Start = s.Start.withDefault()
		setup[i] = s
	}
	cfg.Setup = setup
}

// validateSetup checks every entry of cfg.Setup on its own and against the
// rest of the configuration.
func (cfg Config) validateSetup() []error {
	var errs []error
	listed := map[model.Subscription]bool{}
	for _, s := range cfg.Subscriptions {
		listed[s] = true
	}
	seen := map[model.Subscription]bool{}
	for i, s := range cfg.Setup {
		field := fmt.Sprintf("Setup[%d]", i)
		if err := s.Subscription.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.Subscription: %w", field, err))
			continue
		}
		if !listed[s.Subscription] {
			errs = append(errs, fmt.Errorf("%s is for %s, which Subscriptions does not list: add it there, or drop this entry", field, s.Subscription))
		}
		if seen[s.Subscription] {
			errs = append(errs, fmt.Errorf("%s: %s has more than one entry; merge them into one", field, s.Subscription))
		}
		seen[s.Subscription] = true
		if !s.Create.IsZero() {
			created := s.Create.validate(field + ".Create")
			if len(created) == 0 {
				created = createRejection(cfg, field+".Create", s.Subscription, s.Create)
			}
			errs = append(errs, created...)
		}
		errs = append(errs, s.Start.validate(field+".Start", s.Subscription)...)
	}
	return errs
}

// setupWarnings explains start positions that are valid but probably not
// meant. now is the construction time.
func (cfg Config) setupWarnings(now time.Time) []string {
	var out []string
	for i, s := range cfg.Setup {
		if w := s.Start.warning(fmt.Sprintf("Setup[%d].Start", i), now); w != "" {
			out = append(out, fmt.Sprintf("pubsubio.Read: %s (%s)", w, s.Subscription))
		}
	}
	return out
}
