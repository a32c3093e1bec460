// Package metricstest counts what a function called directly in a test
// reports to Beam's metrics, as a bundle would.
package metricstest

import (
	"context"
	"testing"

	beammetrics "github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
)

// BundleContext is a context Beam accepts metric updates with, as a
// bundle's is: a DoFn or function called with it directly counts into its
// own store.
func BundleContext() context.Context {
	return beammetrics.SetPTransformID(beammetrics.SetBundleID(context.Background(), "bundle"), "step")
}

// CounterSums returns the pubsubio counters of a BundleContext by name.
func CounterSums(t testing.TB, ctx context.Context) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	err := beammetrics.Extractor{SumInt64: func(l beammetrics.Labels, v int64) {
		if l.Namespace() == metrics.Namespace {
			got[l.Name()] += v
		}
	}}.ExtractFrom(beammetrics.GetStore(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return got
}
