package dedup

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.DoFn6x1[context.Context, state.Provider, timers.Provider, string, model.Message, func(model.Message), error](&processingTimeFn{})
	register.DoFn7x1[context.Context, beam.EventTime, state.Provider, timers.Provider, string, model.Message, func(model.Message), error](&eventTimeFn{})
}

// The deduplicating DoFns pass the first message of each key and drop the
// others until the key's timer clears its state. The runner keeps, per
// key, one boolean and one timer. There is one DoFn per time domain
// because Prism (Beam 2.77) never finishes a job whose stateful DoFn
// declares a timer family it does not set.

// newDedupFn is the DoFn of cfg's time domain.
func newDedupFn(cfg Config) any {
	seen := state.MakeValueState[bool]("seen")
	if cfg.TimeDomain == EventTime {
		return &eventTimeFn{Horizon: cfg.Horizon, Seen: seen, Expiry: timers.InEventTime("expiry")}
	}
	return &processingTimeFn{Horizon: cfg.Horizon, Seen: seen, Expiry: timers.InProcessingTime("expiry")}
}

// processingTimeFn forgets a key Horizon of wall-clock time after its
// first message.
type processingTimeFn struct {
	Horizon time.Duration
	Seen    state.Value[bool]
	Expiry  timers.ProcessingTime
}

func (fn *processingTimeFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, _ string, m model.Message, emit func(model.Message)) error {
	first, err := firstCopy(ctx, sp, &fn.Seen)
	if !first || err != nil {
		return err
	}
	// No output timestamp: the timer only forgets, so it must not hold the
	// watermark back.
	fn.Expiry.Set(tp, time.Now().Add(fn.Horizon), timers.WithNoOutputTimestamp())
	emit(m)
	return nil
}

// OnTimer forgets the key: its next message passes.
func (fn *processingTimeFn) OnTimer(_ context.Context, sp state.Provider, _ timers.Provider, _ string, _ timers.Context, _ func(model.Message)) error {
	return fn.Seen.Clear(sp)
}

// eventTimeFn forgets a key once the watermark passes its first message's
// event time plus Horizon.
type eventTimeFn struct {
	Horizon time.Duration
	Seen    state.Value[bool]
	Expiry  timers.EventTime
}

func (fn *eventTimeFn) ProcessElement(ctx context.Context, et beam.EventTime, sp state.Provider, tp timers.Provider, _ string, m model.Message, emit func(model.Message)) error {
	first, err := firstCopy(ctx, sp, &fn.Seen)
	if !first || err != nil {
		return err
	}
	fn.Expiry.Set(tp, expiry(et, fn.Horizon), timers.WithNoOutputTimestamp())
	emit(m)
	return nil
}

// OnTimer forgets the key: its next message passes.
func (fn *eventTimeFn) OnTimer(_ context.Context, sp state.Provider, _ timers.Provider, _ string, _ timers.Context, _ func(model.Message)) error {
	return fn.Seen.Clear(sp)
}

// firstCopy reports whether the key's state holds no earlier message, and
// marks it seen; a duplicate is counted.
func firstCopy(ctx context.Context, sp state.Provider, seen *state.Value[bool]) (bool, error) {
	was, _, err := seen.Read(sp)
	if err != nil {
		return false, err
	}
	if was {
		duplicatesCounter.Inc(ctx, 1)
		return false, nil
	}
	if err := seen.Write(sp, true); err != nil {
		return false, err
	}
	testHookFirstCopy()
	return true, nil
}

// testHookFirstCopy runs when a key's first copy is marked seen; tests
// stall a bundle with it.
var testHookFirstCopy = func() {}

// expiry is when the event-time timer of a key first seen at et fires: et
// plus the horizon, at most the end of the global window.
func expiry(et beam.EventTime, horizon time.Duration) time.Time {
	end := mtime.EndOfGlobalWindowTime
	if et >= end-mtime.FromDuration(horizon) {
		return end.ToTime()
	}
	return et.Add(horizon).ToTime()
}
