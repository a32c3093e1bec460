package source

import (
	"testing"
	"time"
)

func TestLatencyBucketsCoverEveryValueWithinAnEighth(t *testing.T) {
	for _, v := range []uint64{0, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 12345, 999999, 1 << 40, 1<<63 - 1} {
		i := bucketOf(v)
		hi := upperBound(i)
		if v > hi {
			t.Errorf("value %d in bucket %d whose upper bound is %d", v, i, hi)
		}
		if i > 0 && v <= upperBound(i-1) {
			t.Errorf("value %d in bucket %d but bucket %d already holds up to %d", v, i, i-1, upperBound(i-1))
		}
		if v >= subBuckets && float64(hi-v) > float64(v)/8 {
			t.Errorf("value %d reported as %d: more than 12.5%% off", v, hi)
		}
	}
}

func TestLatencyHistogramQuantiles(t *testing.T) {
	var h latencyHistogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	s := h.summary()
	if s.Count != 1000 || s.Max != time.Second {
		t.Fatalf("count %d max %v, want 1000 and 1s", s.Count, s.Max)
	}
	within := func(name string, got, want time.Duration) {
		if got < want || float64(got-want) > float64(want)/8 {
			t.Errorf("%s = %v, want %v to %v", name, got, want, want+want/8)
		}
	}
	within("p50", s.P50, 500*time.Millisecond)
	within("p99", s.P99, 990*time.Millisecond)
	h.reset()
	if s := h.summary(); s.Count != 0 || s.P50 != 0 {
		t.Errorf("after reset: %+v", s)
	}
}
