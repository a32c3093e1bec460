package prepare

import (
	"fmt"
	"maps"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// Owners: the labels on a subscription pubsubio created for a topic say
// which job (pubsubio-job) and which read (pubsubio-read) it is for. Two
// jobs reading one subscription split its messages, and a read whose name
// was generated deletes its subscription when done, so the prepare step
// refuses a subscription created for another job unless
// TopicSubscriptions.Shared says to read it together (ownerRejection), and
// marks an existing one with its own labels (markOwned) where that
// matters: a read deletes only what carries its own pubsubio-read label,
// so once marked, the read of a generated name that created it no longer
// deletes it from under this one; and the job label of one read under
// Shared names the last job to read it, and pubsubio-shared says there
// were others (cmd/pubsubio-orphans keeps it).

// ownerRejection returns why name, one of the read's own topic
// subscriptions as described by desc, cannot be read: pubsubio created it
// for another job and TopicSubscriptions.Shared is not set. Jobs are told
// apart by their --job_name (pubsubio-job); two runs without one are
// taken for the same job. It returns nil for any other subscription.
func (o Owned) ownerRejection(name string, desc *pubsubpb.Subscription) error {
	i := o.index(name)
	if i < 0 || o.Shared {
		return nil
	}
	sub := o.Subscriptions[i]
	labels := desc.GetLabels()
	theirs, ours := labels[LabelJob], o.Job
	if labels[LabelCreatedBy] != LabelCreatedByValue || theirs == ours {
		return nil
	}
	return fmt.Errorf("subscription %s cannot be read: pubsubio created it for job %q (its label %s), and this job is %q: "+
		"two jobs reading one subscription split its messages, and a read whose name was generated deletes its subscription when done; "+
		"give this read another TopicSubscriptions.Name, set TopicSubscriptions.Shared to read it together with %q, or, if that job is gone, delete the subscription "+
		"(gcloud pubsub subscriptions delete %s --project=%s; docs/subscriptions.md, Reading topics, finds the subscriptions of jobs that are gone)",
		name, theirs, LabelJob, ours, theirs, sub.ID, sub.Project)
}

// claimedLabels returns desc's labels marked as this read's (job is the
// read's LabelJob value for it), and whether they need to be: desc is a
// subscription the read takes up that pubsubio created for another read,
// of a generated name (which that read deletes when done) or for another
// job (read under Shared). Another run of the same job with the Name it
// was given leaves them: nobody deletes it. One made by hand keeps the
// user's labels.
func (o Owned) claimedLabels(desc *pubsubpb.Subscription, job string) (map[string]string, bool) {
	labels := desc.GetLabels()
	if labels[LabelCreatedBy] != LabelCreatedByValue || labels[LabelRead] == o.Label {
		return nil, false
	}
	if labels[LabelJob] == job && !IsGeneratedName(labels[LabelName]) {
		return nil, false
	}
	claimed := maps.Clone(labels)
	claimed[LabelRead] = o.Label
	if job != "" {
		claimed[LabelJob] = job
	} else {
		delete(claimed, LabelJob)
	}
	if labels[LabelJob] != job {
		claimed[LabelShared] = "true" // read under Shared by another job too
	}
	return claimed, true
}
