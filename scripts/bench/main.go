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
	"runtime/pprof"
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
	cases    = flag.String("cases", "read,write", "what to measure (comma separated: read, write)")

	writeMessages     = flag.Int("write_messages", 100000, "messages per write run")
	prototypeMessages = flag.Int("prototype_messages", 2000, "messages per run of Beam's prototype writer (it publishes one at a time)")
	sinkInFlight      = flag.Int("sink_inflight", 0, "the sink's MaxInFlightMessages (0: its default); MaxInFlightBytes follows at this many messages of --size")

	cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")

	readTarget  = flag.Float64("read_target", 0.9, "lowest acceptable source/raw throughput ratio")
	writeTarget = flag.Float64("write_target", 0.8, "lowest acceptable sink/raw throughput ratio")
)

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		exitOn(err)
		exitOn(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
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
	report := func(c comparison, target float64) {
		fmt.Println(c)
		if c.ratio() < target {
			fmt.Printf("  BELOW TARGET: ratio %.2f < %.2f\n", c.ratio(), target)
			failed = true
		}
	}
	for _, what := range strings.Split(*cases, ",") {
		switch strings.TrimSpace(what) {
		case "read":
			for _, n := range parseInts(*splits) {
				c, err := compareRead(ctx, env, n)
				exitOn(err)
				report(c, *readTarget)
			}
		case "write":
			c, proto, err := compareWrite(ctx, env)
			exitOn(err)
			report(c, *writeTarget)
			fmt.Printf("  Beam prototype writer (%d messages a run): median %.0f msg/s, runs %v; sink/prototype %.1fx\n",
				*prototypeMessages, median(proto), rounded(proto), median(c.source)/median(proto))
		default:
			exitOn(fmt.Errorf("unknown case %q in --cases; use read and/or write", what))
		}
	}
	if failed {
		pprof.StopCPUProfile()
		os.Exit(2)
	}
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// comparison is one case: both contenders' throughputs, run by run.
type comparison struct {
	name        string
	label       string    // the connector's side: "source" or "sink"
	source, raw []float64 // messages per second
}

func (c comparison) ratio() float64 { return median(c.source) / median(c.raw) }

func (c comparison) String() string {
	return fmt.Sprintf("%-34s %s median %8.0f msg/s  raw median %8.0f msg/s  ratio %.2f\n  %s runs %v\n  raw runs    %v",
		c.name, c.label, median(c.source), median(c.raw), c.ratio(), c.label, rounded(c.source), rounded(c.raw))
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
