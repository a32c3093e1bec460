package source

import "github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"

// readPlan is what construction decides for one read beyond its Config:
// the splits, the subscriptions it creates for its topics, and how it may
// spend delivery attempts on messages that did not fail. It is made once,
// at graph construction (newReadPlan), and travels to the workers in the
// prepare step's DoFn (the cleanup takes only Owned), as exported fields
// since a DoFn travels as JSON.
type readPlan struct {
	// Cfg is the read's configuration with every default set, Topics
	// moved into Subscriptions and Setup (withDefaults).
	Cfg Config
	// Splits are the elements of the read, one per split (planSplits).
	Splits []Split
	// Owned are the subscriptions the read creates for its topics
	// (prepare.WithTopics).
	Owned prepare.Owned
	// Risks are how the read may spend delivery attempts on messages that
	// did not fail, for the prepare step's warnings.
	Risks prepare.AttemptRisks
}

// newReadPlan returns the plan of a read of cfg, or what is wrong with cfg,
// naming the option and the value.
func newReadPlan(cfg Config) (readPlan, error) {
	cfg, owned, err := cfg.withDefaults()
	if err != nil {
		return readPlan{}, err
	}
	return readPlan{
		Cfg:    cfg,
		Splits: planSplits(cfg.Subscriptions, cfg.Ordering, cfg.Splits),
		Owned:  owned,
		Risks:  prepare.RisksOn(!cfg.flowControlled() || cfg.streamsMayExceedBudget()),
	}, nil
}

// job is what the prepare step readies for p.
func (p readPlan) job() prepare.Job {
	return prepare.Job{
		Subscriptions: p.Cfg.Subscriptions,
		Setup:         p.Cfg.Setup,
		Owned:         p.Owned,
		Risks:         p.Risks,
		Needs:         p.Cfg.requirements(),
	}
}
