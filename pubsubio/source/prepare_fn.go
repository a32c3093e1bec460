package source

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(Split), error](&prepareFn{})
	register.Emitter1[Split]()
}

// newAdmin builds the prepare step's admin; tests replace it with a fake.
var newAdmin = dialAdmin

// prepareFn is the prepare step: Impulse -> prepareFn -> Reshuffle -> read
// SDF. Its single element runs prepare (describe, check, create, seek) on a
// worker, with the workers' credentials, and only then emits the split plan
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
	adm, err := newAdmin(ctx, fn.Plan.Cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := adm.close(); err != nil {
			log.Warnf(ctx, "pubsubio.Read: closing the prepare step's client: %v", err)
		}
	}()
	counts, err := prepare(ctx, adm, fn.Plan, time.Now)
	counts.report(ctx)
	if err != nil {
		return err
	}
	for _, s := range fn.Plan.Splits {
		emit(s)
	}
	return nil
}
