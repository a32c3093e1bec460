package sample

import (
	"math"
	"testing"
	"time"
)

func TestLeastSquaresRecoversALine(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4}
	y := make([]float64, len(x))
	for i := range x {
		y[i] = 7 + 2.5*x[i]
	}
	slope, intercept := LeastSquares(x, y)
	if math.Abs(slope-2.5) > 1e-9 || math.Abs(intercept-7) > 1e-9 {
		t.Fatalf("LeastSquares = slope %v intercept %v, want 2.5 and 7", slope, intercept)
	}
	if s, i := LeastSquares([]float64{3, 3}, []float64{1, 2}); s != 0 || i != 0 {
		t.Fatalf("one distinct x: got %v %v, want 0 0", s, i)
	}
}

func TestSummarizeAndWindows(t *testing.T) {
	var s Series
	for i, v := range []float64{5, 1, 4, 2, 3, 10} {
		s = append(s, Point{At: time.Duration(i) * time.Minute, Value: v})
	}
	m := s.Summarize()
	if m.N != 6 || m.Min != 1 || m.Max != 10 || m.Median != 3.5 || m.First != 5 || m.Last != 10 {
		t.Fatalf("Summarize = %+v", m)
	}
	if got := s.From(2 * time.Minute); len(got) != 4 || got[0].Value != 4 {
		t.Fatalf("From(2m) = %v", got)
	}
	if got := s.Until(2 * time.Minute); len(got) != 2 || got[1].Value != 1 {
		t.Fatalf("Until(2m) = %v", got)
	}
}

func TestReadMemoryGrowsWithAnAllocation(t *testing.T) {
	before, err := ReadMemory()
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1 // touch every page so it is resident
	}
	after, err := ReadMemory()
	if err != nil {
		t.Fatal(err)
	}
	if after.RSS-before.RSS < 48<<20 || after.Peak < after.RSS {
		t.Fatalf("RSS %d -> %d (peak %d) after touching 64 MiB", before.RSS, after.RSS, after.Peak)
	}
	_ = b[len(b)-1]
}
