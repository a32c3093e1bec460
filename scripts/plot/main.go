// Command plot draws the figures the bench writes with --figures, one PNG
// per figure, a line per series:
//
//	go run ./scripts/bench --cases=saturation --figures=/tmp/figures.json
//	cd scripts/plot && go run . /tmp/figures.json ../../docs/bench
//
// It is a module of its own, so the plotting library stays out of the
// connector's dependencies.
package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// figure is the bench's figure (scripts/bench/figures.go).
type figure struct {
	Name   string                  `json:"name"`
	Title  string                  `json:"title"`
	X      string                  `json:"x"`
	Y      string                  `json:"y"`
	Series map[string][][2]float64 `json:"series"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: plot FIGURES.json DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(path, dir string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var figs []figure
	if err := json.Unmarshal(b, &figs); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range figs {
		out := filepath.Join(dir, f.Name+".png")
		if err := draw(f, out); err != nil {
			return fmt.Errorf("drawing %s: %w", f.Name, err)
		}
		fmt.Println(out)
	}
	return nil
}

// draw saves f as a PNG at out: every series a line through its points in
// x order, the y axis from zero so that a gap reads as its size.
func draw(f figure, out string) error {
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text = f.X
	p.Y.Label.Text = f.Y
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(8)
	p.Add(plotter.NewGrid())
	names := make([]string, 0, len(f.Series))
	for name := range f.Series {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		pts := slices.Clone(f.Series[name])
		slices.SortFunc(pts, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
		xys := make(plotter.XYs, len(pts))
		for j, pt := range pts {
			xys[j].X, xys[j].Y = pt[0], pt[1]
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(name, line, points)
		p.Y.Max = max(p.Y.Max, maxY(xys)*1.15)
	}
	p.Y.Tick.Marker = plot.TickerFunc(evenTicks)
	return p.Save(8*vg.Inch, 5*vg.Inch, out)
}

// evenTicks labels about five round steps from lo to hi (gonum's
// default labels as few as two on some ranges).
func evenTicks(lo, hi float64) []plot.Tick {
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= 6 {
			step *= m
			break
		}
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ticks
}

func maxY(xys plotter.XYs) float64 {
	m := 0.0
	for _, xy := range xys {
		m = max(m, xy.Y)
	}
	return m
}
