package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// scalingPoint is one configuration of the source on one subscription.
type scalingPoint struct {
	name string
	c    readCase
	cfg  pubsubio.ReadConfig
	got  contender
}

// measureScaling reads one subscription's backlog with the source while
// one knob changes: splits, streams per split (ParallelPullCount), and
// MaxRecordsPerBundle, whose cost shows in CPU per message.
func measureScaling(ctx context.Context, e *env, size, messages, scalingRuns int) ([]scalingPoint, error) {
	var points []scalingPoint
	for _, n := range []int{1, 2, 4, 8} {
		points = append(points, scalingPoint{name: fmt.Sprintf("splits=%d", n), c: readCase{size: size, splitsPerSub: n, subs: 1, messages: messages}})
	}
	for _, n := range []int{2, 4} {
		points = append(points, scalingPoint{name: fmt.Sprintf("splits=1 ParallelPullCount=%d", n),
			c: readCase{size: size, splitsPerSub: 1, subs: 1, messages: messages}, cfg: pubsubio.ReadConfig{ParallelPullCount: n}})
	}
	for _, n := range []int{10, 100, 10000} {
		points = append(points, scalingPoint{name: fmt.Sprintf("splits=1 MaxRecordsPerBundle=%d", n),
			c: readCase{size: size, splitsPerSub: 1, subs: 1, messages: messages}, cfg: pubsubio.ReadConfig{MaxRecordsPerBundle: n}})
	}
	for range scalingRuns {
		for i := range points {
			pt := &points[i]
			ps, err := e.newPairs(ctx, "s", 1)
			if err != nil {
				return nil, err
			}
			if err := e.backlog(ctx, ps, pt.c.messages, pt.c.size); err != nil {
				return nil, err
			}
			s, err := measured("source", pt.c.total(), func() (float64, error) { return readWithSourceConfig(ctx, e, pt.c, ps, pt.cfg, sourceOptions{}) })
			e.drop(ctx, ps)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pt.name, err)
			}
			pt.got.add(s)
		}
	}
	return points, nil
}

func scalingTable(points []scalingPoint) string {
	var b strings.Builder
	b.WriteString("| source configuration (1 subscription) | msg/s | CPU µs/msg | allocs/msg |\n|---|---|---|---|\n")
	for _, pt := range points {
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.0f |\n", pt.name, pt.got.rate(), float64(pt.got.cpu())/1e3, pt.got.allocs())
	}
	return b.String()
}
