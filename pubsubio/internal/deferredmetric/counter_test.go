package deferredmetric

import (
	"context"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
)

// Increments from many goroutines, reported by calls racing them, reach
// the Beam counter exactly once each.
func TestReportsEveryIncrementOnce(t *testing.T) {
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "step")
	c := NewCounter("pubsubio", "test_counter")

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Add(1)
			}
		}()
	}
	c.Report(ctx)
	wg.Wait()
	c.Report(ctx)
	c.Report(ctx)

	var got int64
	err := metrics.Extractor{SumInt64: func(l metrics.Labels, v int64) {
		if l.Name() == "test_counter" {
			got += v
		}
	}}.ExtractFrom(metrics.GetStore(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if got != 800 || c.Load() != 800 {
		t.Errorf("reported %d, counted %d; want 800 each", got, c.Load())
	}
}
