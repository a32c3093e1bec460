package prepare

import (
	"flag"
	"fmt"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// safeDeliveryAttempts is the least MaxDeliveryAttempts the prepare step
// does not warn about on a runner that does not retry a failed bundle in
// place: there every failed job run, failover or restart gives back what
// the read holds, an attempt each (RELIABILITY.md, delivery attempts:
// healthy messages reached 4 and 5 deliveries over 3 and 4 failed Prism
// runs), so a message needs room for several besides its own failures.
const safeDeliveryAttempts = 10

// AttemptRisks are how a read may spend delivery attempts on messages
// that did not fail, as far as construction knows: the prepare step weighs
// them against each subscription's dead-letter policy. It travels in the
// read's plan.
type AttemptRisks struct {
	// OverBudget: the streams may be sent more than the buffer budget
	// holds, and what does not fit is given back, at every bundle while
	// the budget stays full.
	OverBudget bool
	// Restarts names the runner when it does not retry a failed bundle in
	// place; "" when it does (Dataflow).
	Restarts string
}

// RisksOn returns the risks of a read whose streams may be sent more than
// its buffer budget holds (overBudget), on the runner named by --runner.
func RisksOn(overBudget bool) AttemptRisks {
	a := AttemptRisks{OverBudget: overBudget}
	runner := "prism" // Beam Go's default
	if f := flag.Lookup("runner"); f != nil && f.Value.String() != "" {
		runner = f.Value.String()
	}
	if runner != "dataflow" {
		a.Restarts = runner
	}
	return a
}

// warning explains, or returns "", that sub, as described, forwards
// messages to a dead-letter topic after fewer attempts than a read with
// these risks may spend on healthy ones.
func (a AttemptRisks) warning(name string, sub *pubsubpb.Subscription) string {
	policy := sub.GetDeadLetterPolicy()
	if policy.GetDeadLetterTopic() == "" {
		return ""
	}
	n := policy.GetMaxDeliveryAttempts()
	if n == 0 {
		n = 5 // Pub/Sub's default
	}
	var why string
	switch {
	case a.OverBudget:
		why = "its streams may be sent more than the buffer budget holds, and the read gives back what does not fit at every bundle while the budget stays full; " +
			"leave MaxOutstandingMessages and MaxOutstandingBytes unset (each stream's share of the budget) or raise BufferMaxMessages and BufferMaxBytes"
	case a.Restarts != "" && n < safeDeliveryAttempts:
		why = fmt.Sprintf("on runner %q a failed bundle is not retried in place: every failed job run, failover or restart gives back what the read holds, "+
			"an attempt each; raise MaxDeliveryAttempts to at least %d (gcloud pubsub subscriptions update %s --max-delivery-attempts=%d)",
			a.Restarts, safeDeliveryAttempts, name, safeDeliveryAttempts)
	default:
		return ""
	}
	return fmt.Sprintf("pubsubio.Read: subscription %s forwards a message to %s after %d delivery attempts, and this read may spend attempts on messages that did not fail: %s (docs/delivery.md, Delivery guarantee)",
		name, policy.GetDeadLetterTopic(), n, why)
}
