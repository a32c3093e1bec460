package source

import (
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

// What the prepare step does for the read's subscriptions before any split
// reads (Config.Setup, Config.TopicSubscriptions), and the labels of the
// subscriptions it creates for topics. The types are the prepare step's
// own (internal/prepare), where their fields are documented.
type (
	// SubscriptionSetup is what the prepare step does for one
	// subscription: create it when it is missing (Create), and where the
	// read starts (Start).
	SubscriptionSetup = prepare.SubscriptionSetup
	// SubscriptionCreateOptions authorise the prepare step to create a
	// missing subscription, and say how; the zero value authorises
	// nothing. Creation is not an update: a subscription that exists keeps
	// its own settings.
	SubscriptionCreateOptions = prepare.SubscriptionCreateOptions
	// StartPosition is where the read of one subscription starts; the zero
	// value resumes where it is. Any other position seeks the
	// subscription, once per job, before any split reads.
	StartPosition = prepare.StartPosition
	// PositionKind says where a read of a subscription starts.
	PositionKind = prepare.PositionKind
	// TopicSubscriptionOptions name and configure the subscriptions a read
	// creates for Config.Topics; the zero value is a good default.
	TopicSubscriptionOptions = prepare.TopicSubscriptionOptions
)

// The kinds of StartPosition.
const (
	// PositionResume (default) reads from wherever the subscription is:
	// its unacked backlog, then new messages. Nothing is sought.
	PositionResume = prepare.PositionResume
	// PositionEarliestRetained replays everything the subscription still
	// retains: it seeks to Pub/Sub's longest retention (31 days) ago.
	PositionEarliestRetained = prepare.PositionEarliestRetained
	// PositionLatest drops the backlog: it seeks to the moment the seek
	// runs, by the worker's clock.
	PositionLatest = prepare.PositionLatest
	// PositionTimestamp seeks to StartPosition.Time: messages published
	// before it count as acked, those after as unacked.
	PositionTimestamp = prepare.PositionTimestamp
	// PositionSnapshot seeks to StartPosition.Snapshot: the unacked backlog
	// captured by the snapshot plus everything published since.
	PositionSnapshot = prepare.PositionSnapshot
)

// StartEarliestRetained returns PositionEarliestRetained.
func StartEarliestRetained() StartPosition {
	return StartPosition{Kind: PositionEarliestRetained}
}

// StartLatest returns PositionLatest. It is the one position that is not
// reproducible: it resolves when the seek runs, so a job that fails in its
// prepare step and is started again resolves it again, later, discarding
// what was published in between. Use StartFromTimestamp when the boundary
// has to be exact.
func StartLatest() StartPosition { return StartPosition{Kind: PositionLatest} }

// StartFromTimestamp returns PositionTimestamp at t.
func StartFromTimestamp(t time.Time) StartPosition {
	return StartPosition{Kind: PositionTimestamp, Time: t}
}

// StartFromSnapshot returns PositionSnapshot for the snapshot name (an ID in
// the subscription's project, or "projects/P/snapshots/S").
func StartFromSnapshot(name string) StartPosition {
	return StartPosition{Kind: PositionSnapshot, Snapshot: name}
}

// DefaultTopicSubscriptionTTL is the expiration TTL of the subscriptions a
// read creates for topics: Pub/Sub's minimum, 1 day.
const DefaultTopicSubscriptionTTL = prepare.DefaultTopicSubscriptionTTL

// The labels every subscription created for a topic carries
// (docs/subscriptions.md, Reading topics): created-by=pubsubio, the
// TopicSubscriptions.Name, the job (--job_name, if set) and the read.
// LabelRead's value is generated once per construction: it marks the
// subscriptions this read created, or has read since, which are the only
// ones its cleanup deletes. LabelShared is set on one read under
// TopicSubscriptions.Shared. Tools that find the subscriptions of jobs
// that are gone (cmd/pubsubio-orphans) read them.
const (
	LabelCreatedBy      = prepare.LabelCreatedBy
	LabelCreatedByValue = prepare.LabelCreatedByValue
	LabelName           = prepare.LabelName
	LabelJob            = prepare.LabelJob
	LabelRead           = prepare.LabelRead
	LabelShared         = prepare.LabelShared
)

// IsGeneratedName reports whether name has the form of a
// TopicSubscriptions.Name the read generated: "pubsubio-" and 10 random
// characters. The read deletes the subscriptions of such a name once it is
// done; those of a name the user gave are kept for the next run.
func IsGeneratedName(name string) bool { return prepare.IsGeneratedName(name) }

// JobLabel is the value of LabelJob on what a job named name (--job_name)
// creates: name as a valid label value.
func JobLabel(name string) string { return prepare.JobLabel(name) }
