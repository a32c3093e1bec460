package prepare

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// TopicSubscriptionOptions name and configure the subscriptions a read
// creates for Config.Topics. The zero value is a good default: a name
// generated at construction, the labels below, and a subscription that
// expires a day after its last reader went away, or is deleted when the
// read is done.
type TopicSubscriptionOptions struct {
	// Name names the subscriptions: topic T's is
	// projects/<T's project>/subscriptions/<Name>-<T's ID>. Give one to keep
	// the subscriptions across runs: the read never deletes a subscription
	// of a Name it was given, so the next run of a periodic job, or a
	// redeployed one, reads on where the last stopped and loses nothing
	// published in between. If empty, a name is generated when the
	// pipeline is built, "pubsubio-" and 10 random characters, so every
	// construction reads from subscriptions of its own, which the read
	// deletes once it is done: a bounded read once it finished, an
	// unbounded one once a drain acked its last message (a cancelled job's
	// expire after their TTL; docs/subscriptions.md, Reading topics, finds them).
	Name string

	// Shared lets the read consume a subscription of its Name that
	// pubsubio created for another job (its label pubsubio-job names
	// another): the jobs then split its messages. Without it the prepare
	// step refuses such a subscription, naming the other job. Either way
	// the read marks the subscription with its own labels, so a read that
	// generated its name does not delete it from under this one.
	Shared bool

	// Create is how the subscriptions are created; Create.Topic must be
	// left empty (each topic of Topics fills it). If ExpirationTTL and
	// NeverExpire are unset, DefaultTopicSubscriptionTTL (1 day, Pub/Sub's
	// minimum) is used, so the subscription of a job that died does not
	// outlive it by long; and MessageRetention, if unset, is then the TTL
	// (Pub/Sub requires the TTL to be at least the retention). Labels are
	// added to created-by=pubsubio, pubsubio-name=<Name>,
	// pubsubio-read=<an ID generated at construction> and, with the
	// --job_name flag, pubsubio-job=<job name>, so an operator can find
	// them (docs/subscriptions.md, Reading topics); those keys are reserved, and so is
	// pubsubio-shared, set on a subscription read under Shared. A read
	// deletes only subscriptions of a generated name that carry its own
	// pubsubio-read label: one that already existed under the name is read
	// and left.
	Create SubscriptionCreateOptions
}

// DefaultTopicSubscriptionTTL is the expiration TTL of the subscriptions a
// read creates for topics: Pub/Sub's minimum.
const DefaultTopicSubscriptionTTL = minExpirationTTL

// The labels of the subscriptions a read creates for its topics; their
// meaning is documented where source exports them.
const (
	LabelCreatedBy      = "created-by"
	LabelCreatedByValue = "pubsubio"
	LabelName           = "pubsubio-name"
	LabelJob            = "pubsubio-job"
	LabelRead           = "pubsubio-read"
	LabelShared         = "pubsubio-shared"
)

// reservedLabels are the label keys the read sets itself.
var reservedLabels = []string{LabelCreatedBy, LabelName, LabelJob, LabelRead, LabelShared}

// Owned are the subscriptions a read creates for its topics: everything
// the prepare step needs to check each one's topic and owner, and the
// cleanup of a generated name to delete those that carry Label.
// Construction makes it of Config.Topics and TopicSubscriptions
// (WithTopics), and it travels in the read's plan, as JSON.
type Owned struct {
	// Subscriptions and Topics are the subscriptions and their topics, in
	// the order of Config.Topics.
	Subscriptions []model.Subscription
	Topics        []model.Topic
	// Name and Shared are TopicSubscriptions'; Generated says Name was.
	Name      string
	Shared    bool
	Generated bool
	// Label is this construction's LabelRead value, and Job its LabelJob
	// value ("" without --job_name).
	Label string
	Job   string
}

// generatedNamePrefix starts every generated TopicSubscriptions.Name.
const generatedNamePrefix = "pubsubio-"

// IsGeneratedName reports whether name has the form of a
// TopicSubscriptions.Name the read generated: "pubsubio-" and 10 of
// randomID's characters. The read deletes the subscriptions of such a
// name once it is done; those of a name the user gave are kept for the
// next run.
func IsGeneratedName(name string) bool {
	id, ok := strings.CutPrefix(name, generatedNamePrefix)
	return ok && len(id) == randomIDLength && strings.Trim(id, randomIDAlphabet) == ""
}

// maxSubscriptionID is Pub/Sub's longest subscription ID.
const maxSubscriptionID = 255

// WithTopics returns the subscriptions a read of topics creates, named and
// configured by opts, with the setup that creates them; or what is wrong
// with topics and opts. listed are the read's Subscriptions, which must
// not include them, and needs what the read needs of every subscription.
// It generates opts.Name when it is empty, and the read's LabelRead value:
// this runs once per construction, and both travel to the workers in the
// read's plan.
func WithTopics(topics []model.Topic, opts TopicSubscriptionOptions, listed []model.Subscription, needs Requirements) (Owned, []SubscriptionSetup, []error) {
	if len(topics) == 0 {
		if !opts.isZero() {
			return Owned{}, nil, []error{errors.New("TopicSubscriptions is set but Topics is empty, so it would configure nothing; add the topics to read, or drop it")}
		}
		return Owned{}, nil, nil
	}
	generated := opts.Name == ""
	if generated {
		opts.Name = generatedNamePrefix + randomID()
	}
	errs := reservedLabelErrors(opts.Create.Labels)
	label := randomID()
	opts.Create = opts.Create.withTopicDefaults(opts.Name, label)
	errs = append(errs, validateTopics(topics, opts, listed, needs)...)
	if len(errs) > 0 {
		return Owned{}, nil, errs
	}
	owned := Owned{
		Topics: topics, Name: opts.Name, Shared: opts.Shared, Generated: generated,
		Label: label, Job: opts.Create.Labels[LabelJob],
	}
	setup := make([]SubscriptionSetup, len(topics))
	for i, t := range topics {
		owned.Subscriptions = append(owned.Subscriptions, topicSubscription(opts.Name, t))
		setup[i] = SubscriptionSetup{Subscription: owned.Subscriptions[i], Create: opts.Create}
		setup[i].Create.Topic = t
	}
	return owned, setup, nil
}

// topicSubscription is the subscription a read named name creates for t.
func topicSubscription(name string, t model.Topic) model.Subscription {
	return model.SubscriptionOf(t.Project, name+"-"+t.ID)
}

// validateTopics checks Topics and TopicSubscriptions, naming them.
func validateTopics(topics []model.Topic, o TopicSubscriptionOptions, subs []model.Subscription, needs Requirements) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !o.Create.Topic.IsZero() {
		bad("TopicSubscriptions.Create.Topic is %s, but each topic of Topics fills it in; leave it empty", o.Create.Topic)
	}
	listed := map[model.Subscription]bool{}
	for _, s := range subs {
		listed[s] = true
	}
	ok := construct.UniqueValid("Topics", "topic", topics, bad)
	seenErr := map[string]bool{}
	for i, t := range topics {
		if !ok[i] {
			continue
		}
		sub := topicSubscription(o.Name, t)
		invalid := sub.Validate()
		switch {
		case len(sub.ID) > maxSubscriptionID:
			bad("Topics[%d]: its subscription ID %q would be %d characters, over Pub/Sub's %d; shorten TopicSubscriptions.Name", i, text.Truncate(sub.ID, text.MaxQuoted), len(sub.ID), maxSubscriptionID)
			continue
		case invalid != nil:
			bad("TopicSubscriptions.Name %q does not make a valid subscription name for %s: %w", text.Truncate(o.Name, text.MaxQuoted), t, invalid)
			continue
		case listed[sub]:
			bad("Topics[%d]: its subscription %s is also listed in Subscriptions; read it one way only", i, sub)
		}
		create := o.Create
		create.Topic = t
		field := "TopicSubscriptions.Create"
		// The same option is wrong for every topic: say it once.
		for _, err := range append(create.validate(field), createRejection(needs, field, sub, create)...) {
			if msg := err.Error(); !seenErr[msg] {
				seenErr[msg] = true
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// wrongTopic returns why desc, the live subscription name, cannot be this
// read's subscription for its topic: it receives another topic's messages,
// or none (its topic was deleted: Pub/Sub then reports "_deleted-topic_").
// It returns nil when name is not one of the read's topic subscriptions,
// or is on the topic the read creates it for.
func (o Owned) wrongTopic(name string, desc *pubsubpb.Subscription) error {
	i := o.index(name)
	if i < 0 || desc.GetTopic() == o.Topics[i].String() {
		return nil
	}
	return fmt.Errorf("subscription %s cannot be read: it is on topic %q, but this read names its subscription for topic %s so (TopicSubscriptions.Name %q, then the topic's ID): "+
		"it is not a subscription of that topic, and reading it would read another topic's messages, or none if its topic was deleted; "+
		"give the read another TopicSubscriptions.Name, or delete the subscription",
		name, desc.GetTopic(), o.Topics[i], o.Name)
}

// index returns the index of the subscription named name in
// o.Subscriptions, or -1.
func (o Owned) index(name string) int {
	return slices.IndexFunc(o.Subscriptions, func(sub model.Subscription) bool { return sub.String() == name })
}

// CreatedBy reports whether desc carries o's LabelRead: whether this read
// created it.
func (o Owned) CreatedBy(desc *pubsubpb.Subscription) bool {
	return o.Label != "" && desc.GetLabels()[LabelRead] == o.Label
}

// isZero reports whether no option is set.
func (o TopicSubscriptionOptions) isZero() bool {
	return o.Name == "" && !o.Shared && o.Create.IsZero()
}

// reservedLabelErrors names each of labels, the user's
// TopicSubscriptions.Create.Labels, whose key the read sets itself.
func reservedLabelErrors(labels map[string]string) []error {
	var errs []error
	for _, k := range reservedLabels {
		if v, ok := labels[k]; ok {
			errs = append(errs, fmt.Errorf("TopicSubscriptions.Create.Labels[%q] = %q: the key is reserved, the read sets it on the subscriptions it creates "+
				"(docs/subscriptions.md, Reading topics; %s=<an ID of this read> is how a bounded read tells the subscriptions it may delete); use another key", k, text.Truncate(v, text.MaxQuoted), LabelRead))
		}
	}
	return errs
}

// withTopicDefaults fills the options a read's own subscriptions get by
// default: the shortest expiration Pub/Sub allows, a retention within it,
// and the labels that say who made them; read is this construction's
// LabelRead value.
func (o SubscriptionCreateOptions) withTopicDefaults(name, read string) SubscriptionCreateOptions {
	if o.ExpirationTTL == 0 && !o.NeverExpire {
		o.ExpirationTTL = DefaultTopicSubscriptionTTL
	}
	if o.MessageRetention == 0 && o.ExpirationTTL > 0 && o.ExpirationTTL < defaultSubscriptionRetain {
		o.MessageRetention = max(o.ExpirationTTL, minSubscriptionRetain)
	}
	labels := maps.Clone(o.Labels) // never the caller's map
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelCreatedBy] = LabelCreatedByValue
	labels[LabelName] = labelValue(name)
	labels[LabelRead] = read
	if job := flag.Lookup("job_name"); job != nil && job.Value.String() != "" {
		labels[LabelJob] = JobLabel(job.Value.String())
	}
	o.Labels = labels
	return o
}

// JobLabel is the value of LabelJob on what a job named name (--job_name)
// creates: name as a valid label value (labels.go, labelValue).
func JobLabel(name string) string { return labelValue(name) }

// randomID is randomIDLength random lowercase letters and digits (50
// bits): no other construction makes the same.
func randomID() string {
	var b [randomIDLength]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(randomIDAlphabet[c%32])
	}
	return s.String()
}

const (
	randomIDLength   = 10
	randomIDAlphabet = "abcdefghijklmnopqrstuvwxyz234567"
)
