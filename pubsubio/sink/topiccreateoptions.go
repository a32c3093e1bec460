package sink

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// TopicCreateOptions configure topics the sink creates. Each is optional;
// unset leaves Pub/Sub's own default. They apply only to creation: an
// existing topic keeps its settings and is never compared or updated.
type TopicCreateOptions struct {
	// MessageRetention makes the topic keep messages, acked or not, for this
	// long (10 min to 31 days), so that a subscription created later, or a
	// seek back, reaches messages published before it existed. An
	// auto-created topic has no subscriptions: without retention, what is
	// published before a consumer subscribes is kept for nobody.
	MessageRetention time.Duration
	// KMSKeyName encrypts the topic with a customer-managed key,
	// "projects/P/locations/L/keyRings/R/cryptoKeys/K". Pub/Sub's service
	// account needs encrypt/decrypt on it, or publishes to the topic fail.
	KMSKeyName string
	// AllowedPersistenceRegions restricts where Pub/Sub stores the topic's
	// messages.
	AllowedPersistenceRegions []string
	// EnforceInTransit also keeps messages in those regions in transit; it
	// requires AllowedPersistenceRegions.
	EnforceInTransit bool
}

// IsZero reports whether no option is set.
func (o TopicCreateOptions) IsZero() bool {
	return o.MessageRetention == 0 && o.KMSKeyName == "" && len(o.AllowedPersistenceRegions) == 0 && !o.EnforceInTransit
}

// Pub/Sub's bounds on a topic's message retention.
const (
	minTopicRetention = 10 * time.Minute
	maxTopicRetention = 31 * 24 * time.Hour
)

var (
	kmsKeyPattern = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$`)
	regionPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*[a-z0-9]$`)
)

func (o TopicCreateOptions) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r := o.MessageRetention; r != 0 && (r < minTopicRetention || r > maxTopicRetention) {
		bad("TopicCreate.MessageRetention %v must be between %v and %v (31 days), or 0 for none", r, minTopicRetention, maxTopicRetention)
	}
	if o.KMSKeyName != "" && !kmsKeyPattern.MatchString(o.KMSKeyName) {
		bad("TopicCreate.KMSKeyName %q is not a key name of the form projects/P/locations/L/keyRings/R/cryptoKeys/K", text.Truncate(o.KMSKeyName, maxQuoted))
	}
	for i, r := range o.AllowedPersistenceRegions {
		if !regionPattern.MatchString(r) {
			bad("TopicCreate.AllowedPersistenceRegions[%d] %q is not a region name such as europe-west1", i, text.Truncate(r, maxQuoted))
		} else if slices.Index(o.AllowedPersistenceRegions, r) != i {
			bad("TopicCreate.AllowedPersistenceRegions[%d] %q is listed twice", i, r)
		}
	}
	if o.EnforceInTransit && len(o.AllowedPersistenceRegions) == 0 {
		bad("TopicCreate.EnforceInTransit needs AllowedPersistenceRegions: it keeps messages in transit inside those regions")
	}
	return errs
}

// topicProto is the topic the sink creates for name.
func (o TopicCreateOptions) topicProto(name model.Topic) *pubsubpb.Topic {
	t := &pubsubpb.Topic{Name: name.String(), KmsKeyName: o.KMSKeyName}
	if o.MessageRetention > 0 {
		t.MessageRetentionDuration = durationpb.New(o.MessageRetention)
	}
	if len(o.AllowedPersistenceRegions) > 0 || o.EnforceInTransit {
		t.MessageStoragePolicy = &pubsubpb.MessageStoragePolicy{
			AllowedPersistenceRegions: slices.Clone(o.AllowedPersistenceRegions),
			EnforceInTransit:          o.EnforceInTransit,
		}
	}
	return t
}

// describe names the effective options in errors and logs.
func (o TopicCreateOptions) describe() string {
	if o.IsZero() {
		return "Pub/Sub's defaults"
	}
	var parts []string
	if o.MessageRetention > 0 {
		parts = append(parts, fmt.Sprintf("retention %v", o.MessageRetention))
	}
	if o.KMSKeyName != "" {
		parts = append(parts, "KMS key "+o.KMSKeyName)
	}
	if len(o.AllowedPersistenceRegions) > 0 {
		parts = append(parts, "regions "+strings.Join(o.AllowedPersistenceRegions, ","))
	}
	if o.EnforceInTransit {
		parts = append(parts, "enforced in transit")
	}
	return strings.Join(parts, ", ")
}
