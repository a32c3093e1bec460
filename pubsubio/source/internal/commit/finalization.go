package commit

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// Beam Go 2.77.0's exec.Plan.Finalize replaces the plan's finalizer pointer
// (p.bf = &newFinalizer) while the DoFn units keep the old one, so callbacks
// registered through beam.BundleFinalization run only for the first bundle
// of each execution plan; later ones never run and pile up in the stale
// finalizer. Independently, runners ask to finalize every bundle of a DoFn
// that declares the parameter, and the harness logs an ERROR for each that
// registered nothing. So the read declares the parameter only on SDK
// versions without the defect, and even there watches for it at runtime.

// lastDefectiveSDK is the newest Beam Go release known to lose callbacks.
var lastDefectiveSDK = [3]int{2, 77, 0}

// DeliversFinalization reports whether the Beam Go SDK of sdkVersion
// ("major.minor.patch", with an optional "-suffix" or ".dev") is newer
// than the last release known to lose finalization callbacks. An
// unreadable version is taken as one that loses them.
func DeliversFinalization(sdkVersion string) bool {
	v, ok := parseVersion(sdkVersion)
	return ok && compareVersions(v, lastDefectiveSDK) > 0
}

// parseVersion reads "major.minor.patch" with an optional "-suffix" or
// ".dev" (pre-releases and dev builds sort with their release).
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	s, _, _ = strings.Cut(s, "-")
	s = strings.TrimSuffix(s, ".dev")
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// expiry is how long the runner may take to deliver a callback. Acks do
// not depend on it; past it the next bundle acks anyway.
const expiry = 5 * time.Minute

// lost is set, for the whole process, once a Watch sees a callback lost.
var lost atomic.Bool

// Watch detects, in one DoFn instance, a harness that loses callbacks. On
// a correct harness a plan is finalized before it runs its next bundle, so
// when the same BundleFinalization object comes back in a later bundle,
// what was registered on it before has run or expired. If it has neither,
// callbacks are being lost: the process stops registering (acks continue
// through the next bundle) and says so once.
type Watch struct {
	disabled *atomic.Bool // process-wide: once tripped, no instance registers

	bundle     int64 // counts this instance's bundles
	last       beam.BundleFinalization
	lastBundle int64
	lastReg    *registration
}

// NewWatch returns the watch of one DoFn instance.
func NewWatch() *Watch { return &Watch{disabled: &lost} }

// registration is one callback registered in one bundle.
type registration struct {
	mu         sync.Mutex
	ran        bool
	validUntil time.Time
}

func (r *registration) settled(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran || now.After(r.validUntil)
}

// StartBundle marks a bundle boundary of the DoFn instance.
func (w *Watch) StartBundle() { w.bundle++ }

// Register registers ack as bf's callback for this bundle, unless
// callbacks have been seen lost. It reports whether it registered.
func (w *Watch) Register(ctx context.Context, bf beam.BundleFinalization, now time.Time, ack func()) bool {
	if w.disabled.Load() {
		return false
	}
	if bf == w.last && w.lastBundle != w.bundle && w.lastReg != nil && !w.lastReg.settled(now) {
		if w.disabled.CompareAndSwap(false, true) {
			log.Warnf(ctx, "pubsubio.Read: this SDK harness does not deliver bundle finalization callbacks (the Beam Go 2.77 defect); this process stops registering them, and acks go through the next bundle")
		}
		return false
	}
	reg := &registration{validUntil: now.Add(expiry)}
	bf.RegisterCallback(expiry, func() error {
		reg.mu.Lock()
		reg.ran = true
		reg.mu.Unlock()
		ack()
		return nil
	})
	w.last, w.lastBundle, w.lastReg = bf, w.bundle, reg
	return true
}
