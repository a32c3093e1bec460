package dedup

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.DoFn7x1[context.Context, beam.EventTime, state.Provider, timers.Provider, string, model.Message, func(model.Message), error](&stallingEventTimeFn{})
	register.DoFn1x0[model.Message](&countFn{})
}

// stalled makes stallingEventTimeFn stall once per test process.
var stalled atomic.Bool

// stallingEventTimeFn is eventTimeFn, whose code it runs, stalling for
// Stall after the first message it lets through: its bundle makes no
// progress for that long, as a bundle on a loaded machine may.
type stallingEventTimeFn struct {
	Stall   time.Duration
	Horizon time.Duration
	Seen    state.Value[bool]
	Expiry  timers.EventTime
}

func (fn *stallingEventTimeFn) inner() *eventTimeFn {
	return &eventTimeFn{Horizon: fn.Horizon, Seen: fn.Seen, Expiry: fn.Expiry}
}

func (fn *stallingEventTimeFn) ProcessElement(ctx context.Context, et beam.EventTime, sp state.Provider, tp timers.Provider, k string, m model.Message, emit func(model.Message)) error {
	passed := false
	err := fn.inner().ProcessElement(ctx, et, sp, tp, k, m, func(m model.Message) { passed = true; emit(m) })
	if passed && stalled.CompareAndSwap(false, true) {
		time.Sleep(fn.Stall)
	}
	return err
}

func (fn *stallingEventTimeFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, k string, tc timers.Context, emit func(model.Message)) error {
	return fn.inner().OnTimer(ctx, sp, tp, k, tc, emit)
}

// A bundle of the deduplicating DoFn that stalls is split by Prism (Beam
// 2.77): it sends the SDK a channel split and hands the residual elements
// back to the stage (stage.go, Execute's progress loop) with
// stageState.splitBundle (elementmanager.go), which removes the keys of
// the residual elements from inprogressKeys even when the primary still
// holds elements of the same key. A new bundle takes the residual copies
// of the key at once, with the state the stage had committed before the
// stalled bundle, which does not yet hold that bundle's "seen": one more
// copy passes per split. This is the CI flake of integration's
// verifyDeduplicated (one input ID emitted twice) and of
// TestWriteAttributesRoundTrip (2 of 50 keys twice). The experiment
// prism_disable_sdf_split turns Prism's splits off, and every key passes
// once.
func TestDeduplicateInAStalledBundle(t *testing.T) {
	run := func(t *testing.T, experiments string) int {
		t.Helper()
		was := *jobopts.Experiments
		*jobopts.Experiments = experiments
		defer func() { *jobopts.Experiments = was }()
		stalled.Store(false)
		copies := make([]any, 40)
		for i := range copies {
			copies[i] = "a"
		}
		p, s := beam.NewPipelineWithRoot()
		msgs := beam.ParDo(s, withIDAttribute, beam.Create(s, copies...))
		keyed, _ := beam.ParDo2(s, &keyFn{IDAttribute: "id", Missing: MissingPass}, msgs)
		out := beam.ParDo(s, &stallingEventTimeFn{
			Stall: 1500 * time.Millisecond, Horizon: time.Hour,
			Seen: state.MakeValueState[bool]("seen"), Expiry: timers.InEventTime("expiry"),
		}, keyed)
		bucket := fmt.Sprintf("%s#%d", t.Name(), passedSeq.Add(1))
		beam.ParDo0(s, &countFn{Bucket: bucket}, out)
		if err := ptest.Run(p); err != nil {
			t.Fatalf("pipeline failed: %v", err)
		}
		return int(counter(bucket).Load())
	}
	t.Run("prism_splits", func(t *testing.T) {
		if n := run(t, ""); n == 1 {
			t.Errorf("the key passed once: Prism no longer lets a split bundle's residual copies of a key pass; the workaround (prism_disable_sdf_split) may go")
		} else {
			t.Logf("the key passed %d times: Prism's split of the stalled bundle (known, see the test's comment)", n)
		}
	})
	t.Run("prism_disable_sdf_split", func(t *testing.T) {
		if n := run(t, "prism_disable_sdf_split"); n != 1 {
			t.Errorf("the key passed %d times, want 1", n)
		}
	})
}

var (
	passedSeq atomic.Int64
	countsMu  sync.Mutex
	counts    = map[string]*atomic.Int64{}
)

func counter(bucket string) *atomic.Int64 {
	countsMu.Lock()
	defer countsMu.Unlock()
	c := counts[bucket]
	if c == nil {
		c = new(atomic.Int64)
		counts[bucket] = c
	}
	return c
}

// countFn counts what reaches it in the test process (Prism runs the
// worker in it, loopback).
type countFn struct{ Bucket string }

func (fn *countFn) ProcessElement(model.Message) { counter(fn.Bucket).Add(1) }
