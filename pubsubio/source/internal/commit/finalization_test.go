package commit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// start is when the tests' bundles begin.
var start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// newTestWatch returns a Watch with a lost-callback flag of its own, not
// the process's.
func newTestWatch() (*Watch, *atomic.Bool) {
	disabled := new(atomic.Bool)
	return &Watch{disabled: disabled}, disabled
}

// fakeFinalizer is the BundleFinalization object one DoFn instance sees in
// every bundle of its plan. finalize is the plan finalizing a committed
// bundle. A correct harness runs, then forgets, what was registered on the
// object. The Beam Go 2.77 harness runs it only the first time: afterwards
// the plan finalizes a fresh finalizer it swapped in, and what the DoFn
// registers on the object it kept never runs.
type fakeFinalizer struct {
	defective bool
	swapped   bool
	callbacks []func() error
	expiries  []time.Duration
}

func (f *fakeFinalizer) RegisterCallback(d time.Duration, cb func() error) {
	f.callbacks = append(f.callbacks, cb)
	f.expiries = append(f.expiries, d)
}

func (f *fakeFinalizer) finalize(t *testing.T) {
	t.Helper()
	if f.swapped {
		return // the plan finalizes its new finalizer, which holds nothing
	}
	for _, cb := range f.callbacks {
		if err := cb(); err != nil {
			t.Errorf("callback failed: %v", err)
		}
	}
	f.callbacks = nil
	if f.defective {
		f.swapped = true
	}
}

func TestFinalizationWatchTripsOnDefectiveHarness(t *testing.T) {
	ctx := context.Background()
	w, disabled := newTestWatch()
	bf := &fakeFinalizer{defective: true}
	now := start
	ran := 0
	for bundle := 1; bundle <= 6; bundle++ {
		w.StartBundle()
		got := w.Register(ctx, bf, now, func() { ran++ })
		if want := bundle < 3; got != want {
			t.Errorf("bundle %d: register = %v, want %v", bundle, got, want)
		}
		bf.finalize(t)
		now = now.Add(time.Second)
	}
	if !disabled.Load() {
		t.Error("the detector did not trip")
	}
	if ran != 1 {
		t.Errorf("%d callbacks ran, want 1 (only the first bundle's, under the defect)", ran)
	}
	for i, d := range bf.expiries {
		if d != expiry {
			t.Errorf("registration %d with expiry %v, want %v", i, d, expiry)
		}
	}

	// Another instance sharing the flag no longer registers, even on a
	// harness that works.
	other := &Watch{disabled: disabled}
	other.StartBundle()
	good := &fakeFinalizer{}
	if other.Register(ctx, good, now, func() {}) {
		t.Error("another Watch sharing the tripped flag registered")
	}
	if len(good.callbacks) != 0 {
		t.Errorf("%d callbacks registered after the trip", len(good.callbacks))
	}
}

func TestFinalizationWatchNeverTripsOnCorrectHarness(t *testing.T) {
	ctx := context.Background()
	w, disabled := newTestWatch()
	bf := &fakeFinalizer{}
	now := start
	ran := 0
	const bundles = 50
	for bundle := 1; bundle <= bundles; bundle++ {
		w.StartBundle()
		if !w.Register(ctx, bf, now, func() { ran++ }) {
			t.Fatalf("bundle %d: register = false on a correct harness", bundle)
		}
		bf.finalize(t)
		now = now.Add(100 * time.Millisecond)
	}
	if disabled.Load() {
		t.Error("the detector tripped on a correct harness")
	}
	if ran != bundles {
		t.Errorf("%d callbacks ran, want %d", ran, bundles)
	}
}

func TestFinalizationWatchManyRegistrationsInOneBundle(t *testing.T) {
	ctx := context.Background()
	w, disabled := newTestWatch()
	bf := &fakeFinalizer{}
	now := start
	ran := 0
	for bundle := 1; bundle <= 10; bundle++ {
		w.StartBundle()
		// Several splits processed in one bundle each register; none of
		// them has run yet, which is no sign of loss.
		for split := range 4 {
			if !w.Register(ctx, bf, now, func() { ran++ }) {
				t.Fatalf("bundle %d, split %d: register = false", bundle, split)
			}
		}
		bf.finalize(t)
		now = now.Add(time.Second)
	}
	if disabled.Load() {
		t.Error("the detector tripped on registrations within one bundle")
	}
	if ran != 40 {
		t.Errorf("%d callbacks ran, want 40", ran)
	}
}

func TestFinalizationWatchIgnoresExpiredRegistration(t *testing.T) {
	ctx := context.Background()
	w, disabled := newTestWatch()
	bf := &fakeFinalizer{}
	now := start

	w.StartBundle()
	if !w.Register(ctx, bf, now, func() {}) {
		t.Fatal("first register = false")
	}
	// The runner never finalizes this bundle (say, it failed to commit, or
	// the callback expired); the next bundle comes after the expiry.
	w.StartBundle()
	if !w.Register(ctx, bf, now.Add(expiry+time.Second), func() {}) {
		t.Error("register after an expired, unrun registration = false")
	}
	if disabled.Load() {
		t.Error("the detector tripped on an expired registration")
	}
}

// The contrast of the test above: the same unrun registration, not yet
// expired, is a lost callback.
func TestFinalizationWatchTripsOnUnexpiredUnrunRegistration(t *testing.T) {
	ctx := context.Background()
	w, disabled := newTestWatch()
	bf := &fakeFinalizer{}
	now := start
	w.StartBundle()
	w.Register(ctx, bf, now, func() {})
	w.StartBundle()
	if w.Register(ctx, bf, now.Add(expiry-time.Second), func() {}) {
		t.Error("register = true although the previous bundle's callback neither ran nor expired")
	}
	if !disabled.Load() {
		t.Error("the detector did not trip")
	}
}

// A new plan hands the DoFn a new object: what was registered on the old
// one says nothing about the new one.
func TestFinalizationWatchNewObjectDoesNotTrip(t *testing.T) {
	ctx := context.Background()
	w, disabled := newTestWatch()
	now := start
	for bundle := 1; bundle <= 5; bundle++ {
		w.StartBundle()
		if !w.Register(ctx, &fakeFinalizer{}, now, func() {}) {
			t.Fatalf("bundle %d: register = false with a new object", bundle)
		}
	}
	if disabled.Load() {
		t.Error("tripped")
	}
}
