package dedup

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.DoFn3x1[*sdf.LockRTracker, []byte, func(beam.EventTime, model.Message), sdf.ProcessContinuation](&copiesSource{})
	register.Emitter2[beam.EventTime, model.Message]()
	beam.RegisterType(reflect.TypeOf((*offsetrange.Restriction)(nil)).Elem())
}

// copiesSource is a bounded source that ends while copies are in flight,
// as a read ending on MaxMessages does: one message per bundle for keys
// 0..Keys-1, one bundle apart, then a last bundle that emits a copy of
// every key and ends the source, which moves the watermark to the end of
// time.
type copiesSource struct{ Keys int64 }

func (fn *copiesSource) CreateInitialRestriction([]byte) offsetrange.Restriction {
	return offsetrange.Restriction{Start: 0, End: fn.Keys + 1}
}

func (fn *copiesSource) SplitRestriction(_ []byte, r offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{r}
}

func (fn *copiesSource) RestrictionSize(_ []byte, r offsetrange.Restriction) float64 {
	return r.Size()
}

func (fn *copiesSource) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(r))
}

func (fn *copiesSource) ProcessElement(rt *sdf.LockRTracker, _ []byte, emit func(beam.EventTime, model.Message)) sdf.ProcessContinuation {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int64) beam.EventTime { return mtime.FromTime(t0.Add(time.Duration(i) * time.Second)) }
	i := rt.GetRestriction().(offsetrange.Restriction).Start
	if !rt.TryClaim(i) {
		return sdf.StopProcessing()
	}
	if i < fn.Keys {
		emit(at(i), withIDAttribute(fmt.Sprint(i)))
		return sdf.ResumeProcessingIn(0)
	}
	for k := range fn.Keys {
		emit(at(k), withIDAttribute(fmt.Sprint(k)))
	}
	return sdf.ResumeProcessingIn(0) // the next TryClaim fails: the source ends
}

// Copies that reach Deduplicate together with the end of its input are
// dropped: each key's first message passes once. The end of a bounded
// input moves the watermark to the end of time and fires every key's
// event-time timer; the last bundle's copies must be seen before their
// keys are forgotten. Prism orders a key's data before its timers at
// equal times, so this shape passes; the copies CI once saw pass twice
// came from Prism's split of a stalled bundle (split_test.go). This test
// keeps the shape covered.
func TestDeduplicateAtTheEndOfABoundedInput(t *testing.T) {
	const keys = 50
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, &copiesSource{Keys: keys}, beam.Impulse(s))
	out := Deduplicate(s, Config{IDAttribute: "id", Horizon: time.Hour, TimeDomain: EventTime}, msgs)
	passert.Count(s, out, "first copies", keys)
	if err := ptest.Run(p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
}
