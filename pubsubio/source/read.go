package source

import (
	"flag"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn2x0[[]byte, func(Split)](&planFn{})
	register.Emitter1[Split]()
}

// Read reads cfg.Subscriptions and returns a PCollection<model.Message>
// whose event time is each message's publish time (or TimestampAttribute).
// It panics on an invalid configuration; TryRead returns the error.
func Read(s beam.Scope, cfg Config) beam.PCollection {
	col, err := TryRead(s, cfg)
	if err != nil {
		panic(err)
	}
	return col
}

// TryRead is Read returning the construction error instead of panicking.
func TryRead(s beam.Scope, cfg Config) (beam.PCollection, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return beam.PCollection{}, err
	}
	if err := rejectDirectRunner(); err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("pubsubio.Read")
	plan := planSplits(cfg.Subscriptions, cfg.Ordering, cfg.Splits)

	// One element per split, spread over workers by the reshuffle. The
	// prepare step (describe, check, create, seek) belongs here: it runs
	// once per job, before any split reads.
	elems := beam.ParDo(s, &planFn{Splits: plan}, beam.Impulse(s))
	elems = beam.Reshuffle(s, elems)

	read := readFn{ReadID: newProcessID(), SplitCount: len(plan), Cfg: cfg}
	var fn any = &read
	if useFinalization(cfg.Finalization, sdkVersion) {
		fn = &finalizingReadFn{readFn: read}
	}
	out, err := beam.TryParDo(s, fn, elems)
	if err != nil {
		return beam.PCollection{}, fmt.Errorf("pubsubio.Read: %w", err)
	}
	return out[0], nil
}

// planFn emits the split plan computed at graph construction.
type planFn struct {
	Splits []Split
}

func (fn *planFn) ProcessElement(_ []byte, emit func(Split)) {
	for _, s := range fn.Splits {
		emit(s)
	}
}

// rejectDirectRunner refuses Beam Go's deprecated direct runner: it runs
// splittable DoFns through a fallback that ignores process continuations
// and panics on watermark estimators, so the read would silently misbehave.
func rejectDirectRunner() error {
	f := flag.Lookup("runner")
	if f == nil || f.Value.String() != "direct" {
		return nil
	}
	return fmt.Errorf("pubsubio.Read: the direct runner cannot run a streaming splittable DoFn (it ignores process continuations); run with --runner=prism, Beam Go's local runner, or a portable runner")
}
