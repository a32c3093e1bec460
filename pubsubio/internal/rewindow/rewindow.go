// Package rewindow moves a PCollection into the global window and back:
// for steps whose state or emissions must not be split by the input's
// windows (a writer emitting from FinishBundle, deduplication across
// windows), while what comes out is windowed as the input was.
package rewindow

import (
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
)

// IsGlobal reports whether ws is the global window.
func IsGlobal(ws *window.WindowingStrategy) bool { return ws.Fn.Kind == window.GlobalWindows }

// Global returns col in the global window (col itself when it is there
// already), and the windowing strategy it had. Timestamps are kept.
func Global(s beam.Scope, col beam.PCollection) (beam.PCollection, *window.WindowingStrategy) {
	ws := col.WindowingStrategy()
	if IsGlobal(ws) {
		return col, ws
	}
	return beam.WindowInto(s, window.NewGlobalWindows(), col), ws
}

// Restore windows col, in the global window, as ws says: each element,
// at its own timestamp, lands in the window the input's window function
// maps it to, with the input's allowed lateness, trigger and accumulation.
func Restore(s beam.Scope, col beam.PCollection, ws *window.WindowingStrategy) beam.PCollection {
	if IsGlobal(ws) {
		return col
	}
	opts := []beam.WindowIntoOption{beam.AllowedLateness(time.Duration(ws.AllowedLateness) * time.Millisecond)}
	if ws.Trigger != nil {
		opts = append(opts, beam.Trigger(ws.Trigger))
	}
	if ws.AccumulationMode == window.Accumulating {
		opts = append(opts, beam.PanesAccumulate())
	}
	return beam.WindowInto(s, ws.Fn, col, opts...)
}
