package source

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
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

// deleteOwnedFn deletes a finished read's own subscriptions
// (prepare.DeleteOwned).
type deleteOwnedFn struct {
	Owned      prepare.Owned
	Connection connection.Settings
}

func (fn *deleteOwnedFn) ProcessElement(ctx context.Context, _ int64) {
	adm, err := newAdmin(ctx, fn.Owned.Subscriptions[0].Project, fn.Connection)
	if err != nil {
		prepare.NoneDeleted(ctx, fn.Owned, err)
		return
	}
	defer closeAdmin(ctx, adm, "the client that deleted the read's subscriptions")
	prepare.DeleteOwned(ctx, adm, fn.Owned)
}
