package metrics

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
)

// bundleContext is a context Beam accepts metric updates with.
func bundleContext() context.Context {
	return metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "step")
}

// sums returns every counter of ctx's store by name.
func sums(t *testing.T, ctx context.Context) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	err := metrics.Extractor{SumInt64: func(l metrics.Labels, v int64) { got[l.Name()] += v }}.ExtractFrom(metrics.GetStore(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Increments from many goroutines, reported by bundles running at the same
// time (each with its own context, as Beam's metrics require), reach Beam
// exactly once each.
func TestCounterReportsEveryIncrementOnce(t *testing.T) {
	c := NewCounter("test_counter")
	var ctxs []context.Context
	var wg sync.WaitGroup
	for i := range 8 {
		ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), fmt.Sprint("bundle-", i)), "step")
		ctxs = append(ctxs, ctx)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			c.Report(ctx)
		}()
	}
	wg.Wait()
	c.Report(ctxs[0])
	c.Report(ctxs[1])

	var reported int64
	for _, ctx := range ctxs {
		reported += sums(t, ctx)["test_counter"]
	}
	if reported != 800 || c.Load() != 800 {
		t.Errorf("reported %d, counted %d; want 800 each", reported, c.Load())
	}
}

func TestCountersByName(t *testing.T) {
	ctx := bundleContext()
	var s Counters
	s.Add("a", 2)
	s.Add("b", 1)
	s.Report(ctx)
	s.Add("a", 3)
	s.Report(ctx)
	got := sums(t, ctx)
	if got["a"] != 5 || got["b"] != 1 || s.Load("a") != 5 || s.Load("missing") != 0 {
		t.Errorf("reported %v, loaded a=%d; want a=5 b=1", got, s.Load("a"))
	}
}

func TestDistributionReportsEachValueOnce(t *testing.T) {
	ctx := bundleContext()
	d := NewDistribution("test_dist")
	d.Add(3)
	d.Add(7)
	d.Report(ctx)
	d.Report(ctx)
	var count, sum int64
	err := metrics.Extractor{DistributionInt64: func(l metrics.Labels, c, s, _, _ int64) {
		if l.Name() == "test_dist" {
			count, sum = c, s
		}
	}}.ExtractFrom(metrics.GetStore(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if count != 2 || sum != 10 {
		t.Errorf("distribution count %d sum %d, want 2 and 10", count, sum)
	}
}
