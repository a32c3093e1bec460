package source

import (
	"flag"
	"fmt"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// Delivery attempts. Pub/Sub counts one for every delivery of a message:
// the first, and each redelivery after a nack or a lapsed lease. A
// subscription with a dead-letter policy forwards a message once it used
// up MaxDeliveryAttempts, whether or not it ever failed. The read spends
// them only where it must (docs/delivery.md, Delivery guarantee): flow control sized
// from the budget (budget.go), no release while a bundle runs
// (splitreader.go), a failed bundle's healthy messages kept for its retry
// (requeue.go). What it still spends is counted here, and the prepare step
// warns about a dead-letter policy that leaves little room for it.

// countDelivery counts d, just received, in delivery_attempts (when
// Pub/Sub reports its attempt: only with a dead-letter policy) and in
// messages_redelivered when it is a redelivery: Pub/Sub says so, or the
// split still holds the message, or the read gave it back within
// WatermarkWindow (givenback.go).
func (r *splitReader) countDelivery(d *delivery) {
	n := d.msg.DeliveryAttempt
	if n > 0 {
		r.stats.attempts.Add(int64(n))
	}
	if n > 1 || r.ledger.held[d.msg.ID] != nil || r.ledger.givenBack.has(d.msg.ID) {
		r.stats.add(messagesRedelivered, 1)
	}
}

// safeDeliveryAttempts is the least MaxDeliveryAttempts the prepare step
// does not warn about on a runner that does not retry a failed bundle in
// place: there every failed job run, failover or restart gives back what
// the read holds, an attempt each (RELIABILITY.md, delivery attempts:
// healthy messages reached 4 and 5 deliveries over 3 and 4 failed Prism
// runs), so a message needs room for several besides its own failures.
const safeDeliveryAttempts = 10

// attemptRisks are how a read may spend delivery attempts on messages
// that did not fail, as far as construction knows: the prepare step weighs
// them against each subscription's dead-letter policy. It travels in the
// prepare DoFn (Config loses it on the way, like owned).
type attemptRisks struct {
	// OverBudget: the streams may be sent more than the buffer budget
	// holds, and what does not fit is given back, at every bundle while
	// the budget stays full.
	OverBudget bool
	// Restarts names the runner when it does not retry a failed bundle in
	// place; "" when it does (Dataflow).
	Restarts string
}

// attemptRisks returns cfg's risks, for the runner named by --runner.
func (cfg Config) attemptRisks() attemptRisks {
	var a attemptRisks
	if !cfg.flowControlled() || cfg.streamsMayExceedBudget() {
		a.OverBudget = true
	}
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
func (a attemptRisks) warning(name string, sub *pubsubpb.Subscription) string {
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
