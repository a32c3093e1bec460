package source

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph"
)

func TestUseFinalization(t *testing.T) {
	cases := []struct {
		mode    FinalizationMode
		version string
		want    bool
	}{
		{FinalizationAuto, "2.77.0", false},
		{FinalizationAuto, "2.76.0", false},
		{FinalizationAuto, "2.70.3", false},
		{FinalizationAuto, "1.99.99", false},
		{FinalizationAuto, "2.77.1", true},
		{FinalizationAuto, "2.78.0", true},
		{FinalizationAuto, "2.100.0", true},
		{FinalizationAuto, "3.0.0", true},
		// Pre-releases with a "-suffix" sort with their release.
		{FinalizationAuto, "2.78.0-SNAPSHOT", true},
		{FinalizationAuto, "2.77.0-SNAPSHOT", false},
		{FinalizationAuto, "2.78.0-rc1", true},
		// What the code defines for anything else (Beam's own dev builds
		// are "X.Y.Z.dev"): unparseable, so no finalization.
		{FinalizationAuto, "2.78.0.dev", true}, // a dev build sorts with its release
		{FinalizationAuto, "", false},
		{FinalizationAuto, "garbage", false},
		{FinalizationAuto, "2.78", false},
		{FinalizationAuto, "v2.78.0", false},
		{FinalizationAuto, "2.x.0", false},
		// The unset mode is AUTO.
		{"", "2.77.0", false},
		{"", "2.78.0", true},
		// Forcing either way ignores the version.
		{FinalizationOn, "2.77.0", true},
		{FinalizationOn, "2.60.0", true},
		{FinalizationOn, "garbage", true},
		{FinalizationOff, "2.78.0", false},
		{FinalizationOff, "3.0.0", false},
	}
	for _, c := range cases {
		if got := useFinalization(c.mode, c.version); got != c.want {
			t.Errorf("useFinalization(%q, %q) = %v, want %v", c.mode, c.version, got, c.want)
		}
	}
}

// TryRead builds the DoFn that declares finalization only when
// useFinalization says so for the SDK compiled in.
func TestTryReadPicksTheDoFnBySDKVersion(t *testing.T) {
	prev := sdkVersion
	t.Cleanup(func() { sdkVersion = prev })
	cases := []struct {
		version    string
		mode       FinalizationMode
		finalizing bool
	}{
		{"2.77.0", FinalizationAuto, false},
		{"2.78.0", FinalizationAuto, true},
		{"2.77.0", FinalizationOn, true},
		{"2.78.0", FinalizationOff, false},
	}
	for _, c := range cases {
		sdkVersion = c.version
		p, s := beam.NewPipelineWithRoot()
		cfg := validConfig()
		cfg.Finalization = c.mode
		if _, err := TryRead(s, cfg); err != nil {
			t.Errorf("SDK %s, mode %s: TryRead: %v", c.version, c.mode, err)
			continue
		}
		edges, _, err := p.Build()
		if err != nil {
			t.Errorf("SDK %s, mode %s: build: %v", c.version, c.mode, err)
			continue
		}
		var kinds []string
		for _, e := range edges {
			if e.DoFn == nil {
				continue
			}
			switch (*graph.Fn)(e.DoFn).Recv.(type) {
			case *readFn:
				kinds = append(kinds, "readFn")
			case *finalizingReadFn:
				kinds = append(kinds, "finalizingReadFn")
			}
		}
		want := "readFn"
		if c.finalizing {
			want = "finalizingReadFn"
		}
		if len(kinds) != 1 || kinds[0] != want {
			t.Errorf("SDK %s, mode %s: read DoFns %v, want [%s]", c.version, c.mode, kinds, want)
		}
	}
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
	var disabled atomic.Bool
	w := &finalizationWatch{disabled: &disabled}
	bf := &fakeFinalizer{defective: true}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ran := 0
	for bundle := 1; bundle <= 6; bundle++ {
		w.startBundle()
		got := w.register(ctx, bf, now, func() { ran++ })
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
		if d != finalizationExpiry {
			t.Errorf("registration %d with expiry %v, want %v", i, d, finalizationExpiry)
		}
	}

	// Another instance sharing the flag no longer registers, even on a
	// harness that works.
	other := &finalizationWatch{disabled: &disabled}
	other.startBundle()
	good := &fakeFinalizer{}
	if other.register(ctx, good, now, func() {}) {
		t.Error("another finalizationWatch sharing the tripped flag registered")
	}
	if len(good.callbacks) != 0 {
		t.Errorf("%d callbacks registered after the trip", len(good.callbacks))
	}
}

func TestFinalizationWatchNeverTripsOnCorrectHarness(t *testing.T) {
	ctx := context.Background()
	var disabled atomic.Bool
	w := &finalizationWatch{disabled: &disabled}
	bf := &fakeFinalizer{}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ran := 0
	const bundles = 50
	for bundle := 1; bundle <= bundles; bundle++ {
		w.startBundle()
		if !w.register(ctx, bf, now, func() { ran++ }) {
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
	var disabled atomic.Bool
	w := &finalizationWatch{disabled: &disabled}
	bf := &fakeFinalizer{}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ran := 0
	for bundle := 1; bundle <= 10; bundle++ {
		w.startBundle()
		// Several splits processed in one bundle each register; none of
		// them has run yet, which is no sign of loss.
		for split := range 4 {
			if !w.register(ctx, bf, now, func() { ran++ }) {
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
	var disabled atomic.Bool
	w := &finalizationWatch{disabled: &disabled}
	bf := &fakeFinalizer{}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

	w.startBundle()
	if !w.register(ctx, bf, now, func() {}) {
		t.Fatal("first register = false")
	}
	// The runner never finalizes this bundle (say, it failed to commit, or
	// the callback expired); the next bundle comes after the expiry.
	w.startBundle()
	if !w.register(ctx, bf, now.Add(finalizationExpiry+time.Second), func() {}) {
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
	var disabled atomic.Bool
	w := &finalizationWatch{disabled: &disabled}
	bf := &fakeFinalizer{}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	w.startBundle()
	w.register(ctx, bf, now, func() {})
	w.startBundle()
	if w.register(ctx, bf, now.Add(finalizationExpiry-time.Second), func() {}) {
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
	var disabled atomic.Bool
	w := &finalizationWatch{disabled: &disabled}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for bundle := 1; bundle <= 5; bundle++ {
		w.startBundle()
		if !w.register(ctx, &fakeFinalizer{}, now, func() {}) {
			t.Fatalf("bundle %d: register = false with a new object", bundle)
		}
	}
	if disabled.Load() {
		t.Error("tripped")
	}
}
