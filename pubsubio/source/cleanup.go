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
	register.Function1x1(countOne)
	register.Function2x1(sum)
	register.DoFn2x0[context.Context, int64](&deleteOwnedFn{})
}

// deleteWhenDone adds to a bounded read the step that deletes the
// subscriptions it created for its topics, once the read is done. Its
// input is the count of what the read emitted, plus a zero so that an
// empty read counts too: one element, which exists only once every split
// finished, and a split finishes after its last, ack-only bundle. So
// nothing is deleted while a split still has acks to send.
func deleteWhenDone(s beam.Scope, cfg Config, msgs beam.PCollection) {
	s = s.Scope("DeleteTopicSubscriptions")
	ones := beam.ParDo(s, countOne, msgs)
	count := beam.Combine(s, sum, beam.Flatten(s, ones, beam.Create(s, int64(0))))
	beam.ParDo0(s, &deleteOwnedFn{Owned: cfg.owned, Connection: cfg.Connection}, count)
}

func countOne(model.Message) int64 { return 1 }
func sum(a, b int64) int64         { return a + b }

// deleteOwnedFn deletes a finished bounded read's own subscriptions.
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
// or made by hand). One already gone counts as deleted. A failure does not
// fail the job, whose messages were all read and acked: it is logged with
// the command that removes the subscription, which otherwise expires after
// its TTL. Pub/Sub has no conditional delete: a subscription deleted and
// made again by someone else between the describe and the delete would
// be deleted.
func (fn *deleteOwnedFn) ProcessElement(ctx context.Context, read int64) {
	failed := func(sub model.Subscription, err error) {
		subscriptionDeletesFailedCounter.Inc(ctx, 1)
		log.Warnf(ctx, "pubsubio.Read: could not delete %s, the subscription this bounded read created for its topic: %v; "+
			"it expires after its TTL, or remove it now: gcloud pubsub subscriptions delete %s --project=%s", sub, err, sub.ID, sub.Project)
	}
	gone := func(sub model.Subscription, how string) {
		subscriptionsDeletedCounter.Inc(ctx, 1)
		log.Infof(ctx, "pubsubio.Read: the bounded read finished (%d messages); %s, the subscription it created for its topic, %s", read, sub, how)
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
			log.Infof(ctx, "pubsubio.Read: the bounded read finished (%d messages); left %s in place: this read did not create it (its label %s is %q, this read's %q)",
				read, sub, labelRead, desc.GetLabels()[labelRead], fn.Owned.Label)
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
