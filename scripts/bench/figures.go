package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
)

var figuresPath = flag.String("figures", "", "write the curves of the saturation cases (read rate and CPU per message against streams, the bundle-size curve) to this JSON file; scripts/plot draws each as a PNG")

// figure is one plot: a curve per series, each point a median of runs.
type figure struct {
	Name   string                  `json:"name"` // the PNG's file name, without .png
	Title  string                  `json:"title"`
	X      string                  `json:"x"` // axis labels
	Y      string                  `json:"y"`
	Series map[string][][2]float64 `json:"series"`
}

// figureSet collects the figures of one run of the bench, in the order
// they were first drawn on.
type figureSet struct{ figures []*figure }

// figures is this run's figureSet.
var figures figureSet

// add puts the point (x, y) on series of the figure name, made with title
// and axis labels x and y the first time.
func (fs *figureSet) add(name, title, xLabel, yLabel, series string, x, y float64) {
	i := slices.IndexFunc(fs.figures, func(f *figure) bool { return f.Name == name })
	if i < 0 {
		fs.figures = append(fs.figures, &figure{Name: name, Title: title, X: xLabel, Y: yLabel, Series: map[string][][2]float64{}})
		i = len(fs.figures) - 1
	}
	if y > 0 { // a contender that did not run
		fs.figures[i].Series[series] = append(fs.figures[i].Series[series], [2]float64{x, y})
	}
}

// write saves the figures to path, if any were drawn on.
func (fs *figureSet) write(path string) error {
	if path == "" || len(fs.figures) == 0 {
		return nil
	}
	b, err := json.MarshalIndent(fs.figures, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing --figures: %w", err)
	}
	return nil
}
