package prepare

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var (
	subscriptionsDeletedCounter      = beam.NewCounter(metrics.Namespace, "subscriptions_deleted")
	subscriptionDeletesFailedCounter = beam.NewCounter(metrics.Namespace, "subscription_deletes_failed")
)

// DeleteOwned deletes, once the read is done, every subscription of owned
// that this read created: it describes each one first, and leaves one
// without the read's label (it existed before the read, under the same
// name: another job's, or made by hand; or another read has marked it its
// own since, owners.go). One already gone counts as deleted. A failure does
// not fail the job, whose messages were all read and acked: it is logged
// with the command that removes the subscription, which otherwise expires
// after its TTL. Pub/Sub has no conditional delete: a subscription deleted
// and made again by someone else between the describe and the delete would
// be deleted.
func DeleteOwned(ctx context.Context, adm Admin, owned Owned) {
	for _, sub := range owned.Subscriptions {
		desc, err := adm.GetSubscription(ctx, sub.String())
		switch {
		case status.Code(err) == codes.NotFound:
			deleted(ctx, sub, "was already gone")
			continue
		case err != nil:
			notDeleted(ctx, sub, describeGetError(sub, err))
			continue
		case !owned.CreatedBy(desc):
			log.Infof(ctx, "pubsubio.Read: the read is done; left %s in place: this read did not create it, or another read has read it since (its label %s is %q, this read's %q)",
				sub, LabelRead, desc.GetLabels()[LabelRead], owned.Label)
			continue
		}
		switch err := adm.DeleteSubscription(ctx, sub.String()); {
		case err == nil, status.Code(err) == codes.NotFound:
			deleted(ctx, sub, "is deleted")
		case status.Code(err) == codes.PermissionDenied:
			notDeleted(ctx, sub, fmt.Errorf("the workers' credentials need pubsub.subscriptions.delete on it (roles/pubsub.editor): %w", err))
		default:
			notDeleted(ctx, sub, err)
		}
	}
}

// NoneDeleted reports that none of owned could be deleted: connecting
// failed with err.
func NoneDeleted(ctx context.Context, owned Owned, err error) {
	for _, sub := range owned.Subscriptions {
		notDeleted(ctx, sub, err)
	}
}

// deleted counts and logs sub, gone as how says.
func deleted(ctx context.Context, sub model.Subscription, how string) {
	subscriptionsDeletedCounter.Inc(ctx, 1)
	log.Infof(ctx, "pubsubio.Read: the read is done; %s, the subscription it created for its topic, %s", sub, how)
}

// notDeleted counts and logs that sub could not be deleted, and how to
// remove it.
func notDeleted(ctx context.Context, sub model.Subscription, err error) {
	subscriptionDeletesFailedCounter.Inc(ctx, 1)
	log.Warnf(ctx, "pubsubio.Read: could not delete %s, the subscription this read created for its topic: %v; "+
		"it expires after its TTL, or remove it now: gcloud pubsub subscriptions delete %s --project=%s", sub, err, sub.ID, sub.Project)
}
