package source

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(Split), error](&prepareFn{})
	register.Emitter1[Split]()
}

// newAdmin connects the prepare step and the cleanup to Pub/Sub; tests
// replace it.
var newAdmin = prepare.Dial

// prepareFn is the prepare step: Impulse -> prepareFn -> Reshuffle -> read
// SDF. Its single element runs prepare.Run (describe, check, create, seek)
// on a worker, with the workers' credentials, and only then emits the split plan
// computed at construction, one element per split.
//
// Why this runs once per job and never when a split resumes: the splits
// exist only as this DoFn's output, and the runner commits that output once.
// After it, the read SDF lives on through its residuals, which a restart or
// a retried read bundle resumes without going back through here. Before it,
// a failed prepare bundle is retried as a whole, seeking again before any
// split has read anything. A redeploy is a new job with a new Impulse, so
// it prepares, and seeks, again.
type prepareFn struct {
	Plan readPlan
}

func (fn *prepareFn) ProcessElement(ctx context.Context, _ []byte, emit func(Split)) error {
	adm, err := newAdmin(ctx, fn.Plan.Cfg.Subscriptions[0].Project, fn.Plan.Cfg.Connection)
	if err != nil {
		return err
	}
	defer closeAdmin(ctx, adm, "the prepare step's client")
	counts, err := prepare.Run(ctx, adm, fn.Plan.job(), time.Now)
	counts.Report(ctx)
	if err != nil {
		return err
	}
	for _, s := range fn.Plan.Splits {
		emit(s)
	}
	return nil
}

// closeAdmin closes adm, named what in the warning when that fails.
func closeAdmin(ctx context.Context, adm prepare.Admin, what string) {
	if err := adm.Close(); err != nil {
		log.Warnf(ctx, "pubsubio.Read: closing %s: %v", what, err)
	}
}
