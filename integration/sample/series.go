package sample

import (
	"fmt"
	"sort"
	"time"
)

// Point is one observation of a quantity at an offset from the start of a
// run.
type Point struct {
	At    time.Duration
	Value float64
}

// Series is one quantity observed over a run, in the order observed.
type Series []Point

// Summary is what a series is reduced to in reports.
type Summary struct {
	N                int
	Min, Median, Max float64
	SlopePerMinute   float64 // least-squares trend, units per minute
	First, Last      float64 // the first and last values observed
}

// From returns the points observed at or after offset: the series past a
// warm-up.
func (s Series) From(offset time.Duration) Series {
	for i, p := range s {
		if p.At >= offset {
			return s[i:]
		}
	}
	return nil
}

// Until returns the points observed before offset.
func (s Series) Until(offset time.Duration) Series {
	for i, p := range s {
		if p.At >= offset {
			return s[:i]
		}
	}
	return s
}

// Summarize reduces s. An empty series gives a zero Summary.
func (s Series) Summarize() Summary {
	if len(s) == 0 {
		return Summary{}
	}
	vals := make([]float64, len(s))
	for i, p := range s {
		vals[i] = p.Value
	}
	sort.Float64s(vals)
	med := vals[len(vals)/2]
	if len(vals)%2 == 0 {
		med = (vals[len(vals)/2-1] + vals[len(vals)/2]) / 2
	}
	return Summary{
		N: len(s), Min: vals[0], Median: med, Max: vals[len(vals)-1],
		SlopePerMinute: s.slopePerMinute(),
		First:          s[0].Value, Last: s[len(s)-1].Value,
	}
}

// slopePerMinute is the least-squares slope of value against time, per
// minute.
func (s Series) slopePerMinute() float64 {
	x, y := make([]float64, len(s)), make([]float64, len(s))
	for i, p := range s {
		x[i], y[i] = p.At.Minutes(), p.Value
	}
	slope, _ := LeastSquares(x, y)
	return slope
}

// LeastSquares fits y = intercept + slope*x; both are 0 with fewer than
// two distinct x.
func LeastSquares(x, y []float64) (slope, intercept float64) {
	n := float64(len(x))
	if n == 0 {
		return 0, 0
	}
	var sx, sy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for i := range x {
		dx := x[i] - mx
		sxx += dx * dx
		sxy += dx * (y[i] - my)
	}
	if sxx == 0 {
		return 0, 0
	}
	slope = sxy / sxx
	return slope, my - slope*mx
}

// Format formats a summary with values divided by scale (e.g. MiB) and
// shown with the given unit.
func (m Summary) Format(scale float64, unit string) string {
	return fmt.Sprintf("n=%d min=%.1f median=%.1f max=%.1f first=%.1f last=%.1f slope=%+.2f %s/min",
		m.N, m.Min/scale, m.Median/scale, m.Max/scale, m.First/scale, m.Last/scale, m.SlopePerMinute/scale, unit)
}
