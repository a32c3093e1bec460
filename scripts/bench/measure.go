package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sample is one run of one contender.
type sample struct {
	rate     float64       // messages per second
	cpu      time.Duration // this process's CPU per message
	emulator time.Duration // the Pub/Sub server's CPU per message (0: not measured)
	runner   time.Duration // a standalone Prism's CPU per message (0: none)
	allocs   float64       // heap allocations per message in this process
}

// measured runs f, which moves n messages and returns their rate, and adds
// what the process spent per message. The whole process is counted: for
// pipelines that includes Prism, for the raw client its own goroutines.
// The run's goroutines carry the pprof label contender=who, so a
// --cpuprofile can be narrowed to one contender with -tagfocus (Prism's
// long-lived goroutines carry the label of the run that started it).
// While steady is set, only the run's steady state counts.
func measured(who string, n int, f func() (float64, error)) (sample, error) {
	if steady != nil {
		steady = &window{}
	}
	from := now()
	var rate float64
	var err error
	pprof.Do(context.Background(), pprof.Labels("contender", who), func(context.Context) { rate, err = f() })
	to := now()
	if err != nil {
		return sample{}, err
	}
	if steady != nil && steady.complete() {
		from, to = steady.from, steady.to
	}
	return sample{
		rate:     rate,
		cpu:      (to.cpu - from.cpu) / time.Duration(n),
		emulator: (to.server - from.server) / time.Duration(n),
		runner:   (to.runner - from.runner) / time.Duration(n),
		allocs:   float64(to.mallocs-from.mallocs) / float64(n),
	}, nil
}

// snapshot is what this process, the server and a standalone Prism have
// spent so far.
type snapshot struct {
	at                  time.Time
	cpu, server, runner time.Duration
	mallocs             uint64
}

func now() snapshot {
	cpu, mallocs := usage()
	return snapshot{at: time.Now(), cpu: cpu, mallocs: mallocs, server: groupCPU(serverGroup), runner: groupCPU(runnerGroup)}
}

// steady, when set, makes measured count a run's steady state only: from
// its first message to its last (the contenders mark both with
// steady.begin and steady.end), so the start-up and shutdown of a
// pipeline, a constant whatever the run's length, do not weigh on the
// figures per message. The saturation cases set it.
var steady *window

// window is one run's steady state. Its methods do nothing on nil.
type window struct {
	begun, ended sync.Once
	from, to     snapshot
	done         atomic.Bool
}

func (w *window) begin() {
	if w != nil {
		w.begun.Do(func() { w.from = now() })
	}
}

func (w *window) end() {
	if w != nil {
		w.ended.Do(func() { w.to = now(); w.done.Store(true) })
	}
}

func (w *window) complete() bool { return w != nil && w.done.Load() && w.from.cpu > 0 }

func usage() (cpu time.Duration, mallocs uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return selfCPU(), ms.Mallocs
}

// selfCPU is the CPU this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// contender is one side of a comparison, run by run.
type contender struct {
	samples  []sample
	failures []error // runs that did not move every message
}

func (c *contender) add(s sample) { c.samples = append(c.samples, s) }

// fail records a run that failed; the case goes on with the next run and
// the failure is reported with the results.
func (c *contender) fail(name string, run int, err error) {
	fmt.Printf("  %s: run %d failed: %v\n", name, run+1, err)
	c.failures = append(c.failures, err)
}

func (c contender) rates() []float64 { return c.each(func(s sample) float64 { return s.rate }) }

// each is one figure of every run.
func (c contender) each(f func(sample) float64) []float64 {
	var xs []float64
	for _, s := range c.samples {
		xs = append(xs, f(s))
	}
	return xs
}

func (c contender) rate() float64 { return median(c.rates()) }

func (c contender) cpu() time.Duration {
	return time.Duration(median(c.each(func(s sample) float64 { return float64(s.cpu) })))
}

func (c contender) emulatorCPU() time.Duration {
	return time.Duration(median(c.each(func(s sample) float64 { return float64(s.emulator) })))
}

func (c contender) runnerCPU() time.Duration {
	return time.Duration(median(c.each(func(s sample) float64 { return float64(s.runner) })))
}

func (c contender) allocs() float64 {
	return median(c.each(func(s sample) float64 { return s.allocs }))
}

func (c contender) ran() bool { return len(c.samples) > 0 }

// comparison is one case: the connector against the raw client with the
// same settings, and Beam's prototype where it can run the case.
type comparison struct {
	name                 string
	connector, raw, prot contender
	// atProtoStreams is the source opening as many streams per subscription
	// as the prototype (read cases with one split per subscription).
	atProtoStreams contender
	// rawAtProtoStreams is the raw client at those streams: what any reader
	// that acks everything gets from them.
	rawAtProtoStreams contender
}

// vsPrototype is the connector's rate over the prototype's, at equal
// streams where that was measured (one split per subscription), else at
// the source's streams against the prototype's 10 per subscription.
func (c comparison) vsPrototype() float64 {
	if c.atProtoStreams.ran() {
		return c.atProtoStreams.rate() / c.prot.rate()
	}
	return c.connector.rate() / c.prot.rate()
}

func (c comparison) ratio() float64 { return c.connector.rate() / c.raw.rate() }

func (c comparison) detail() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", c.name)
	line := func(who string, x contender) {
		if x.ran() {
			fmt.Fprintf(&b, "  %-26s median %8.0f msg/s  cpu %6s µs/msg  emulator cpu %6s µs/msg  allocs %6.1f/msg  runs %v\n",
				who, x.rate(), micros(x.cpu()), micros(x.emulatorCPU()), x.allocs(), rounded(x.rates()))
		}
	}
	for _, n := range c.named() {
		line(n.name, *n.c)
	}
	return b.String()
}

type namedContender struct {
	name string
	c    *contender
}

func (c *comparison) named() []namedContender {
	return []namedContender{
		{"pubsubio", &c.connector}, {"raw", &c.raw}, {"prototype", &c.prot},
		{fmt.Sprintf("pubsubio at %d streams/sub", prototypeStreams), &c.atProtoStreams},
		{fmt.Sprintf("raw at %d streams/sub", prototypeStreams), &c.rawAtProtoStreams},
	}
}

// failures names every contender with failed runs.
func (c comparison) failures() []string {
	var out []string
	for _, n := range c.named() {
		if f := n.c.failures; len(f) > 0 {
			out = append(out, fmt.Sprintf("%s: %s failed %d of %d runs (first: %v)", c.name, n.name, len(f), len(f)+len(n.c.samples), f[0]))
		}
	}
	return out
}

// tableRow is the comparison as a markdown table row (see tableHeader).
func (c comparison) tableRow() string {
	proto, atStreams, vsProto := "n/a", "n/a", "n/a"
	protoCPU, protoEmu := "n/a", "n/a"
	if c.prot.ran() {
		proto = fmt.Sprintf("%.0f", c.prot.rate())
		vsProto = fmt.Sprintf("%.2fx", c.vsPrototype())
		protoCPU, protoEmu = micros(c.prot.cpu()), micros(c.prot.emulatorCPU())
	}
	if c.atProtoStreams.ran() {
		atStreams = fmt.Sprintf("%.0f / %.0f", c.atProtoStreams.rate(), c.rawAtProtoStreams.rate())
	}
	return fmt.Sprintf("| %s | %.0f | %.0f | **%.2f** | %s | %s | %s | %s / %s / %s | %s / %s / %s | %.0f / %.0f |",
		c.name, c.connector.rate(), c.raw.rate(), c.ratio(), proto, atStreams, vsProto,
		micros(c.connector.cpu()), micros(c.raw.cpu()), protoCPU,
		micros(c.connector.emulatorCPU()), micros(c.raw.emulatorCPU()), protoEmu,
		c.connector.allocs(), c.raw.allocs())
}

func micros(d time.Duration) string { return fmt.Sprintf("%.1f", microsOf(d)) }

func microsOf(d time.Duration) float64 { return float64(d) / 1e3 }

const tableHeader = "| case | pubsubio msg/s | raw msg/s | ratio | prototype msg/s | at the prototype's 10 streams/sub: pubsubio / raw msg/s | vs prototype | CPU µs/msg (pubsubio / raw / prototype) | emulator CPU µs/msg (pubsubio / raw / prototype) | allocs/msg (pubsubio / raw) |\n" +
	"|---|---|---|---|---|---|---|---|---|---|"

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

// percentile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}
