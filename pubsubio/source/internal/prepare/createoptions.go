package prepare

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// SubscriptionCreateOptions authorise the prepare step to create a missing
// subscription, and say how. The zero value authorises nothing: the
// subscription must exist. Every field but Topic is optional; unset leaves
// Pub/Sub's own default.
//
// Creation is not an update: a subscription that exists keeps its own
// settings, and these are neither applied to it nor compared with it.
// ALREADY_EXISTS (another job created it first) counts as success.
type SubscriptionCreateOptions struct {
	// Topic is the topic the subscription receives from; required. Settings
	// are per subscription because of it: Pub/Sub delivers a full copy of a
	// topic to each of its subscriptions, so one shared setting would read
	// every message once per subscription.
	Topic model.Topic
	// AckDeadline is the subscription's ack deadline, whole seconds from 10 s
	// to 600 s (default 10 s, Pub/Sub's). The client extends leases
	// automatically, so this mostly bounds redelivery after a crash.
	AckDeadline time.Duration
	// EnableMessageOrdering makes Pub/Sub deliver a key's messages in
	// publish order; required under OrderingPerKey. Fixed at creation.
	EnableMessageOrdering bool
	// EnableExactlyOnceDelivery makes Pub/Sub answer every ack and not
	// redeliver a message once its ack was confirmed (docs/delivery.md, Exactly-once
	// delivery). Default off, Pub/Sub's.
	EnableExactlyOnceDelivery bool
	// MessageRetention is how long the subscription keeps messages after
	// publication, 10 min to 31 days (default 7 days, Pub/Sub's). With
	// RetainAckedMessages it is also how far back a seek can replay.
	MessageRetention time.Duration
	// RetainAckedMessages keeps acked messages for MessageRetention, so a
	// backwards start position can replay them (default off, Pub/Sub's).
	RetainAckedMessages bool
	// ExpirationTTL deletes the subscription after this long without
	// activity: at least 1 day, and at least the message retention, as
	// Pub/Sub requires (a subscription must not expire while it still
	// retains messages). Default 31 days, Pub/Sub's. Cannot be combined
	// with NeverExpire.
	ExpirationTTL time.Duration
	// NeverExpire keeps the subscription however long it is idle, for a
	// streaming job that may be stopped for longer than ExpirationTTL.
	NeverExpire bool
	// DeadLetterTopic, when set, makes Pub/Sub forward a message delivered
	// MaxDeliveryAttempts times to this topic instead of redelivering it.
	// Pub/Sub's service account needs to publish there and to subscribe to
	// this subscription, or forwarding silently does not happen.
	DeadLetterTopic model.Topic
	// MaxDeliveryAttempts is the dead-letter threshold, 5 to 100 (default 5,
	// Pub/Sub's); only with DeadLetterTopic.
	MaxDeliveryAttempts int
	// Filter delivers only messages whose attributes match this expression
	// in Pub/Sub's filter language (at most 256 bytes; its shape is checked
	// at construction, the rest by Pub/Sub); Pub/Sub acks the rest itself.
	// Fixed at creation. https://cloud.google.com/pubsub/docs/filtering
	Filter string
	// Labels are the subscription's labels, for an operator to find and
	// account for it (gcloud pubsub subscriptions list
	// --filter=labels.KEY=VALUE). Pub/Sub's rules apply and are checked at
	// construction: at most 64; keys 1 to 63 characters, starting with a
	// lowercase letter; keys and values of lowercase letters, digits, "_"
	// and "-", values at most 63 characters.
	// https://cloud.google.com/pubsub/docs/labels
	Labels map[string]string
}

// Pub/Sub's bounds on subscription settings
// (https://cloud.google.com/pubsub/docs/subscription-properties and the
// Subscription message of google/pubsub/v1).
const (
	minAckDeadline            = 10 * time.Second
	maxAckDeadline            = 600 * time.Second
	minSubscriptionRetain     = 10 * time.Minute
	maxSubscriptionRetain     = maxRetention
	defaultSubscriptionRetain = 7 * 24 * time.Hour // Pub/Sub's default retention
	minExpirationTTL          = 24 * time.Hour
	maxExpirationTTL          = 365 * 24 * time.Hour
	minDeliveryAttempts       = 5
	maxDeliveryAttempts       = 100
	maxFilterBytes            = 256
)

// IsZero reports whether no option is set: the subscription must exist.
func (o SubscriptionCreateOptions) IsZero() bool {
	return o.Topic.IsZero() && o.AckDeadline == 0 && !o.EnableMessageOrdering && !o.EnableExactlyOnceDelivery && o.MessageRetention == 0 &&
		!o.RetainAckedMessages && o.ExpirationTTL == 0 && !o.NeverExpire && o.DeadLetterTopic.IsZero() &&
		o.MaxDeliveryAttempts == 0 && o.Filter == "" && len(o.Labels) == 0
}

// validate checks the options on their own; field is how errors name them.
// Errors name the value and the allowed range.
func (o SubscriptionCreateOptions) validate(field string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(field+"."+format, args...))
	}
	if o.Topic.IsZero() {
		bad("Topic is empty: a subscription cannot be created without the topic it receives from; set Topic, or leave every create option unset if the subscription already exists")
	} else if err := o.Topic.Validate(); err != nil {
		bad("Topic: %w", err)
	}
	if d := o.AckDeadline; d != 0 && (d < minAckDeadline || d > maxAckDeadline || d%time.Second != 0) {
		bad("AckDeadline %v must be whole seconds from %v to %v (Pub/Sub's range), or 0 for Pub/Sub's 10s", d, minAckDeadline, maxAckDeadline)
	}
	if r := o.MessageRetention; r != 0 && (r < minSubscriptionRetain || r > maxSubscriptionRetain) {
		bad("MessageRetention %v must be from %v to %v (31 days, Pub/Sub's range for subscriptions), or 0 for Pub/Sub's 7 days", r, minSubscriptionRetain, maxSubscriptionRetain)
	}
	switch ttl := o.ExpirationTTL; {
	case ttl < 0:
		bad("ExpirationTTL %v must be positive, or 0 for Pub/Sub's 31 days; use NeverExpire for no expiration", ttl)
	case ttl > 0 && o.NeverExpire:
		bad("ExpirationTTL %v and NeverExpire are both set; choose one", ttl)
	case ttl > 0 && (ttl < minExpirationTTL || ttl > maxExpirationTTL):
		bad("ExpirationTTL %v must be from %v to %v (Pub/Sub's range); use NeverExpire for no expiration", ttl, minExpirationTTL, maxExpirationTTL)
	case ttl > 0 && ttl < o.retention():
		bad("ExpirationTTL %v must be at least the message retention %v, as Pub/Sub requires (a subscription must not expire while it retains messages); raise ExpirationTTL or lower MessageRetention", ttl, o.retention())
	}
	if !o.DeadLetterTopic.IsZero() {
		if err := o.DeadLetterTopic.Validate(); err != nil {
			bad("DeadLetterTopic: %w", err)
		} else if o.DeadLetterTopic == o.Topic {
			bad("DeadLetterTopic %s is the subscription's own topic: dead letters would be delivered back to it; use a separate topic", o.DeadLetterTopic)
		}
	}
	if n := o.MaxDeliveryAttempts; n != 0 {
		if n < minDeliveryAttempts || n > maxDeliveryAttempts {
			bad("MaxDeliveryAttempts %d must be from %d to %d (Pub/Sub's range), or 0 for Pub/Sub's 5", n, minDeliveryAttempts, maxDeliveryAttempts)
		}
		if o.DeadLetterTopic.IsZero() {
			bad("MaxDeliveryAttempts %d is set without DeadLetterTopic: it only bounds forwarding to a dead-letter topic; set DeadLetterTopic or clear it", n)
		}
	}
	if len(o.Filter) > maxFilterBytes {
		bad("Filter is %d bytes, over Pub/Sub's %d", len(o.Filter), maxFilterBytes)
	} else if o.Filter != "" && strings.TrimSpace(o.Filter) == "" {
		bad("Filter %q is blank; leave it empty to deliver every message", o.Filter)
	} else if why := filterSyntaxError(o.Filter); o.Filter != "" && why != "" {
		bad("Filter %q is not in Pub/Sub's filter language: %s", o.Filter, why)
	}
	for _, err := range labelProblems(o.Labels) {
		errs = append(errs, fmt.Errorf("%s.%w", field, err))
	}
	return errs
}

// retention is the message retention the created subscription will have.
func (o SubscriptionCreateOptions) retention() time.Duration {
	if o.MessageRetention > 0 {
		return o.MessageRetention
	}
	return defaultSubscriptionRetain
}

// subscriptionProto is the subscription the prepare step creates as name.
// Unset options stay unset, so Pub/Sub applies its defaults.
func (o SubscriptionCreateOptions) subscriptionProto(name model.Subscription) *pubsubpb.Subscription {
	s := &pubsubpb.Subscription{
		Name:                  name.String(),
		Topic:                 o.Topic.String(),
		AckDeadlineSeconds:    int32(o.AckDeadline / time.Second),
		EnableMessageOrdering: o.EnableMessageOrdering,
		RetainAckedMessages:   o.RetainAckedMessages,
		Filter:                o.Filter,
		Labels:                maps.Clone(o.Labels),
	}
	s.EnableExactlyOnceDelivery = o.EnableExactlyOnceDelivery
	if o.MessageRetention > 0 {
		s.MessageRetentionDuration = durationpb.New(o.MessageRetention)
	}
	switch {
	case o.NeverExpire:
		// A policy without a TTL is Pub/Sub's "never expires"; no policy at
		// all would be its 31-day default.
		s.ExpirationPolicy = &pubsubpb.ExpirationPolicy{}
	case o.ExpirationTTL > 0:
		s.ExpirationPolicy = &pubsubpb.ExpirationPolicy{Ttl: durationpb.New(o.ExpirationTTL)}
	}
	if !o.DeadLetterTopic.IsZero() {
		s.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{
			DeadLetterTopic:     o.DeadLetterTopic.String(),
			MaxDeliveryAttempts: int32(o.MaxDeliveryAttempts),
		}
	}
	return s
}
