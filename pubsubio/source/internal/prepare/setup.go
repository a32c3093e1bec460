package prepare

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

// SetupFor returns the setup of sub in setup; the zero value (must exist,
// resume) when it has none.
func SetupFor(setup []SubscriptionSetup, sub model.Subscription) SubscriptionSetup {
	for _, s := range setup {
		if s.Subscription == sub {
			return s
		}
	}
	return SubscriptionSetup{Subscription: sub, Start: StartPosition{Kind: PositionResume}}
}

// SetupWithDefaults returns setup with an empty start position read as
// PositionResume, in a new array: never the caller's.
func SetupWithDefaults(setup []SubscriptionSetup) []SubscriptionSetup {
	if setup == nil {
		return nil
	}
	out := make([]SubscriptionSetup, len(setup))
	for i, s := range setup {
		s.Start = s.Start.withDefault()
		out[i] = s
	}
	return out
}

// ValidateSetup checks every entry of setup (Config.Setup) on its own and
// against subs (Config.Subscriptions) and what the read needs of every
// subscription.
func ValidateSetup(setup []SubscriptionSetup, subs []model.Subscription, needs Requirements) []error {
	var errs []error
	listed := map[model.Subscription]bool{}
	for _, s := range subs {
		listed[s] = true
	}
	seen := map[model.Subscription]bool{}
	for i, s := range setup {
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
				created = createRejection(needs, field+".Create", s.Subscription, s.Create)
			}
			errs = append(errs, created...)
		}
		errs = append(errs, s.Start.validate(field+".Start", s.Subscription)...)
	}
	return errs
}

// SetupWarnings explains start positions of setup that are valid but
// probably not meant. now is the construction time.
func SetupWarnings(setup []SubscriptionSetup, now time.Time) []string {
	var out []string
	for i, s := range setup {
		if w := s.Start.warning(fmt.Sprintf("Setup[%d].Start", i), now); w != "" {
			out = append(out, fmt.Sprintf("pubsubio.Read: %s (%s)", w, s.Subscription))
		}
	}
	return out
}
