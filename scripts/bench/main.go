// Command bench measures pubsubio against the raw Pub/Sub client on the same
// emulator in the same run: interleaved runs, medians and their ratio.
// Absolute numbers from a shared machine are noise; the ratio is the result.
//
//	go run ./scripts/bench                    # starts its own emulator
//	go run ./scripts/bench --emulator=host:port --runs=5 --messages=50000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

var (
	endpoint = flag.String("emulator", "", "host:port of a running Pub/Sub emulator (default: start one)")
	runs     = flag.Int("runs", 3, "runs of each contender per case")
	messages = flag.Int("messages", 50000, "messages per run")
	size     = flag.Int("size", 1024, "payload bytes per message")
	splits   = flag.String("splits", "1,4", "split counts to measure (comma separated)")
	target   = flag.Float64("target", 0.9, "lowest acceptable source/raw throughput ratio")
)

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()
	ep := *endpoint
	if ep == "" {
		e, err := emulator.Start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: starting the emulator:", err)
			os.Exit(1)
		}
		defer e.Stop()
		ep = e.Endpoint
	}
	env, err := newEnv(ctx, ep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer env.close()

	failed := false
	for _, n := range parseInts(*splits) {
		res, err := compareRead(ctx, env, n)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Println(res)
		if res.ratio() < *target {
			fmt.Printf("  BELOW TARGET: ratio %.2f < %.2f\n", res.ratio(), *target)
			failed = true
		}
	}
	if failed {
		os.Exit(2)
	}
}

// comparison is one case: both contenders' throughputs, run by run.
type comparison struct {
	name        string
	source, raw []float64 // messages per second
}

func (c comparison) ratio() float64 { return median(c.source) / median(c.raw) }

func (c comparison) String() string {
	return fmt.Sprintf("%-34s source median %8.0f msg/s  raw median %8.0f msg/s  ratio %.2f\n  source runs %v\n  raw runs    %v",
		c.name, median(c.source), median(c.raw), c.ratio(), rounded(c.source), rounded(c.raw))
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}

func parseInts(s string) []int {
	var out []int
	for _, part := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(part)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}
