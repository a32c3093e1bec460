package source

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.DoFn2x0[context.Context, int64](&deleteOwnedFn{})
}

// deleteWhenDone adds to a read of a generated TopicSubscriptions.Name the
// step that deletes the subscriptions it created for its topics, once the
// read is done (whenDone): a bounded read once it finished, an unbounded
// one once a drain ended it. So nothing is deleted while a split still has
// acks to send, and a cancelled job deletes nothing: its subscriptions
// expire after their TTL.
func deleteWhenDone(s beam.Scope, p readPlan, msgs beam.PCollection) {
	s = s.Scope("DeleteTopicSubscriptions")
	beam.ParDo0(s, &deleteOwnedFn{Owned: p.Owned, Connection: p.Cfg.Connection}, whenDone(s, msgs))
}

// deleteOwnedFn deletes a finished read's own subscriptions.
type deleteOwnedFn struct {
	Owned      ownedSubscriptions
	Connection connection.Settings
}

var (
	subscriptionsDeletedCounter      = beam.NewCounter(metrics.Namespace, "subscriptions_deleted")
	subscriptionDeletesFailedCounter = beam.NewCounter(metrics.Namespace, "subscription_deletes_failed")
)

// ProcessElement deletes every subscription of Owned that this read
// created: it describes each one first, and leaves one without the read's
// label (it existed before the read, under the same name: another job's,
// or made by hand; or another read has marked it its own since,
// prepare_owners.go). One already gone counts as deleted. A failure does
// not fail the job, whose messages were all read and acked: it is logged with
// the command that removes the subscription, which otherwise expires after
// its TTL. Pub/Sub has no conditional delete: a subscription deleted and
// made again by someone else between the describe and the delete would
// be deleted.
func (fn *deleteOwnedFn) ProcessElement(ctx context.Context, _ int64) {
	failed := func(sub model.Subscription, err error) {
		subscriptionDeletesFailedCounter.Inc(ctx, 1)
		log.Warnf(ctx, "pubsubio.Read: could not delete %s, the subscription this read created for its topic: %v; "+
			"it expires after its TTL, or remove it now: gcloud pubsub subscriptions delete %s --project=%s", sub, err, sub.ID, sub.Project)
	}
	gone := func(sub model.Subscription, how string) {
		subscriptionsDeletedCounter.Inc(ctx, 1)
		log.Infof(ctx, "pubsubio.Read: the read is done; %s, the subscription it created for its topic, %s", sub, how)
	}
	adm, err := newAdmin(ctx, Config{Subscriptions: fn.Owned.Subscriptions, Connection: fn.Connection})
	if err != nil {
		for _, sub := range fn.Owned.Subscriptions {
			failed(sub, err)
		}
		return
	}
	defer func() {
		if err := adm.close(); err != nil {
			log.Warnf(ctx, "pubsubio.Read: closing the client that deleted the read's subscriptions: %v", err)
		}
	}()
	for _, sub := range fn.Owned.Subscriptions {
		desc, err := adm.getSubscription(ctx, sub.String())
		switch {
		case status.Code(err) == codes.NotFound:
			gone(sub, "was already gone")
			continue
		case err != nil:
			failed(sub, describeGetError(sub, err))
			continue
		case !fn.Owned.createdBy(desc):
			log.Infof(ctx, "pubsubio.Read: the read is done; left %s in place: this read did not create it, or another read has read it since (its label %s is %q, this read's %q)",
				sub, LabelRead, desc.GetLabels()[LabelRead], fn.Owned.Label)
			continue
		}
		switch err := adm.deleteSubscription(ctx, sub.String()); {
		case err == nil, status.Code(err) == codes.NotFound:
			gone(sub, "is deleted")
		case status.Code(err) == codes.PermissionDenied:
			failed(sub, fmt.Errorf("the workers' credentials need pubsub.subscriptions.delete on it (roles/pubsub.editor): %w", err))
		default:
			failed(sub, err)
		}
	}
}
