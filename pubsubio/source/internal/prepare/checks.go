package prepare

import (
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Requirements are the read's settings that a subscription must suit,
// from its Config.
type Requirements struct {
	// OrderingPerKey is Config.Ordering PER_KEY: the subscription must
	// have message ordering enabled.
	OrderingPerKey bool
	// MaxDurationPerAckExtension is Config's: under 60 s it cannot bound
	// the leases of a subscription with exactly-once delivery.
	MaxDurationPerAckExtension time.Duration
	// DecodePolicy is Config's: DecodeNack needs a dead-letter policy.
	DecodePolicy model.DecodePolicy
}

// minExactlyOnceExtension is the shortest lease extension the client
// makes on an exactly-once subscription, whatever
// MaxDurationPerAckExtension says (the client's iterator.go,
// minDurationPerLeaseExtensionExactlyOnce).
const minExactlyOnceExtension = 60 * time.Second

// check is one reason the read cannot consume a subscription. The prepare
// step runs every check against every described subscription before it
// creates or seeks anything; construction runs them against the
// subscription that create options would make, so that settings the
// prepare step would reject once used are refused before the job starts.
type check struct {
	// setting names the subscription setting at fault.
	setting string
	// rejects reports whether sub cannot be read by a read that needs r.
	rejects func(r Requirements, sub *pubsubpb.Subscription) bool
	// conflict, if set, names the read's own setting that conflicts with
	// the subscription's, with its value.
	conflict func(r Requirements) string
	// why explains the rejection and says what to do about an existing
	// subscription.
	why string
	// createFix says what to change in SubscriptionCreateOptions.
	createFix string
}

// describe is the conflict c found under r: the subscription's setting,
// and the read's where one is at fault too.
func (c check) describe(r Requirements) string {
	if c.conflict == nil {
		return c.setting
	}
	return c.setting + " and " + c.conflict(r)
}

// checks is every rejection. A new policy that needs a subscription setting
// adds a row here, and both the prepare step and construction apply it.
var checks = []check{
	{
		setting: "message ordering is disabled",
		rejects: func(r Requirements, sub *pubsubpb.Subscription) bool {
			return r.OrderingPerKey && !sub.GetEnableMessageOrdering()
		},
		why: "Ordering PER_KEY needs it: Pub/Sub keeps ordering-key order only on ordering-enabled subscriptions, " +
			"so the job would deliver unordered messages without a word. Message ordering is fixed at creation: " +
			"read a subscription created with message ordering enabled, or use Ordering NONE",
		createFix: "Ordering PER_KEY needs it: set EnableMessageOrdering",
	},
	{
		setting: "exactly-once delivery is enabled",
		rejects: func(r Requirements, sub *pubsubpb.Subscription) bool {
			return sub.GetEnableExactlyOnceDelivery() && r.MaxDurationPerAckExtension > 0 && r.MaxDurationPerAckExtension < minExactlyOnceExtension
		},
		conflict: func(r Requirements) string {
			return fmt.Sprintf("MaxDurationPerAckExtension is %v", r.MaxDurationPerAckExtension)
		},
		why: "the client extends its leases by at least 60 s, whatever MaxDurationPerAckExtension says, so the bound it sets would not hold: " +
			"leave MaxDurationPerAckExtension unset or at least 60s, or read a subscription without exactly-once delivery",
		createFix: "the client extends its leases by at least 60 s: leave MaxDurationPerAckExtension unset or at least 60s, or leave EnableExactlyOnceDelivery unset",
	},
	{
		setting: "it has no dead-letter policy",
		rejects: func(r Requirements, sub *pubsubpb.Subscription) bool {
			return r.DecodePolicy == model.DecodeNack && sub.GetDeadLetterPolicy().GetDeadLetterTopic() == ""
		},
		why: "DecodePolicy " + string(model.DecodeNack) + " needs one: it nacks undecodable messages so that the subscription's dead-letter policy " +
			"forwards them, and without one a poison message is redelivered forever, invisibly. " +
			"Add one (gcloud pubsub subscriptions update SUBSCRIPTION --dead-letter-topic=TOPIC --max-delivery-attempts=5) " +
			"or use DecodePolicy " + string(model.DecodeDeadLetter) + " or " + string(model.DecodeFail),
		createFix: "DecodePolicy " + string(model.DecodeNack) + " needs a dead-letter policy, or poison messages are redelivered forever: set DeadLetterTopic",
	},
}

// createRejection returns why the subscription that o would create cannot
// be read by a read that needs r; field is how the error names the options.
func createRejection(r Requirements, field string, name model.Subscription, o SubscriptionCreateOptions) []error {
	var errs []error
	sub := o.subscriptionProto(name)
	for _, c := range checks {
		if c.rejects(r, sub) {
			errs = append(errs, fmt.Errorf("%s would create a subscription the read rejects: %s; %s", field, c.describe(r), c.createFix))
		}
	}
	return errs
}

// retentionWarning explains, or returns "", that a backwards start position
// on sub recovers only never-acked messages: sub neither retains acked
// messages nor has a topic that retains messages.
func retentionWarning(name string, pos StartPosition, sub *pubsubpb.Subscription) string {
	if !pos.backwards() || sub.GetRetainAckedMessages() || sub.GetTopicMessageRetentionDuration().AsDuration() > 0 {
		return ""
	}
	return fmt.Sprintf("pubsubio.Read: start position %s on %s recovers only messages that were never acked: "+
		"the subscription does not retain acked messages and its topic does not retain messages. "+
		"To replay acked messages, enable retain acked messages on the subscription or message retention on the topic before they are published",
		pos.describe(), name)
}
