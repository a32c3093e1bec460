// Command bench measures pubsubio against the raw Pub/Sub client and Beam's
// prototype connector (examples/native_wordcap/nativepubsubio, used as a
// library) on the same emulator in the same run: interleaved runs, medians
// and ratios. Absolute numbers from a shared machine are noise; the ratios
// are the result. BENCHMARKS.md records the latest table.
//
//	go run ./scripts/bench                           # everything, own emulator
//	go run ./scripts/bench --cases=write --runs=5    # one part
//	go run ./scripts/bench --cases=typed             # Decode and Encode; no emulator
//	go run ./scripts/bench --cases=saturation        # against a server with the service's shape (--sat_shape)
//	go run ./scripts/bench --cases=flink             # the read on Flink by checkpoint interval, beside Prism and raw
//	go run ./scripts/bench --cases=windows           # window end to result, steady and behind a backlog
//	go run ./scripts/bench --cases=destinations      # 300 topics in round robin on the emulator: messages per Publish RPC
//	go run ./scripts/bench --cases=tracing           # per-message cost of ReadConfig/WriteConfig.Tracing, off and on
//
// It exits 2 when a ratio falls below its target, naming it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

var (
	endpoint = flag.String("emulator", "", "host:port of a running Pub/Sub emulator (default: start one)")
	cases    = flag.String("cases", "read,write,destinations,latency,scaling,memory,stages,typed,dedup,tracing", "what to measure (comma separated)")
	runs     = flag.Int("runs", 3, "runs of each contender per throughput case")
	only     = flag.String("only", "", "run only the read and write cases whose name contains this text, e.g. \"16384 B, 3 sub\"")
	entrants = flag.String("contenders", "", "run only these contenders of the read and write cases (comma separated: source, sink, raw, prototype, source-10-streams, raw-10-streams), e.g. to profile one; targets are checked only where both sides ran")

	readMessages      = flag.Int("read_messages", 50000, "messages per subscription per read run, 1 KiB cases")
	readMessagesLarge = flag.Int("read_messages_16k", 10000, "messages per subscription per read run, 16 KiB cases")
	writeMessages     = flag.Int("write_messages", 100000, "messages per write run, 1 KiB cases")
	writeMessages64k  = flag.Int("write_messages_64k", 10000, "messages per write run, 64 KiB cases")
	protoMessages     = flag.Int("prototype_messages", 1000, "messages per run of Beam's prototype writer (it publishes one at a time), 1 KiB")
	protoMessages64k  = flag.Int("prototype_messages_64k", 200, "the same, 64 KiB")

	latencyRate    = flag.Int("latency_rate", 500, "messages per second fed to the latency pipeline")
	latencySeconds = flag.Int("latency_seconds", 20, "how long the latency pipeline is fed")
	latencyDelay   = flag.Duration("latency_write_delay", 0, "the latency pipeline's Publisher.DelayThreshold (0: the sink's default)")

	windowsRate    = flag.Int("windows_rate", 500, "messages per second fed to the windows pipeline")
	windowsSeconds = flag.Int("windows_seconds", 30, "how long the windows pipeline is fed")
	windowsBacklog = flag.Int("windows_backlog", 20000, "messages published before the windows pipeline starts, in its backlog run")

	scalingMessages = flag.Int("scaling_messages", 20000, "messages per scaling run")
	scalingRuns     = flag.Int("scaling_runs", 1, "runs per scaling point")

	warmUpMessages = flag.Int("warmup_messages", 200000, "messages published and read through the emulator before anything is measured (0: none)")

	memoryHold = flag.Duration("memory_hold", 10*time.Second, "how long the memory case holds its messages while RSS is sampled")

	stageWait = flag.Duration("stage_wait", 5*time.Second, "how long Pub/Sub takes to answer a publish in the stages case")

	typedMessages = flag.Int("typed_messages", 50000, "messages per run of each typed case")
	typedTarget   = flag.Float64("typed_target", 1.2, "highest acceptable pubsubio/hand-written cost ratio of the typed transforms, but for Avro decoding")
	// Avro decoding alone walks each binary payload before goavro reads
	// it (pubsubio/typed/avroscan.go), which the hand-written DoFn does
	// not: BENCHMARKS.md, Typed messages, has the walk's cost and why the
	// target leaves room for it and for a shared machine's spread.
	typedAvroDecodeTarget = flag.Float64("typed_avro_decode_target", 1.35, "highest acceptable pubsubio/hand-written cost ratio of decoding binary Avro, which also walks each payload before goavro reads it (a poison payload's block counts would otherwise make goavro ask for gigabytes), work the hand-written DoFn skips")

	dedupMessages = flag.Int("dedup_messages", 50000, "messages per run of the dedup case")
	dedupSize     = flag.Int("dedup_size", 64, "payload bytes in the dedup case: small, so the keys' state stands out from the payloads in the heap")

	tracingMessages = flag.Int("tracing_messages", 20000, "messages per run of the tracing case (1 KiB)")

	cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile = flag.String("memprofile", "", "write an allocation profile of the whole run to this file")

	readTarget  = flag.Float64("read_target", 0.8, "lowest acceptable source/raw throughput ratio")
	writeTarget = flag.Float64("write_target", 0.8, "lowest acceptable sink/raw throughput ratio")
)

func main() {
	flag.Parse()
	if *satServeFlag {
		os.Exit(serveSaturation())
	}
	beam.Init()
	os.Exit(run(context.Background()))
}

// run returns the exit status, so the emulator it started is stopped on
// every path.
func run(ctx context.Context) int {
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	var env *env
	if needsEmulator(*cases) {
		ep := *endpoint
		if ep == "" {
			e, err := emulator.Start(ctx)
			if err != nil {
				return fail(err)
			}
			defer e.Stop()
			ep = e.Endpoint
			serverGroup = e.PID()
		}
		var err error
		if env, err = newEnv(ctx, ep); err != nil {
			return fail(err)
		}
		defer env.close()
		if err := env.warmUp(ctx, *warmUpMessages); err != nil {
			return fail(fmt.Errorf("warming up the emulator: %w", err))
		}
	}

	var report strings.Builder
	var misses []string
	var table []comparison
	for _, what := range strings.Split(*cases, ",") {
		switch what = strings.TrimSpace(what); what {
		case "read":
			for _, c := range readCases() {
				if !strings.Contains(c.String(), *only) {
					continue
				}
				cmp, err := compareRead(ctx, env, c)
				if err != nil {
					return fail(err)
				}
				fmt.Print(cmp.detail())
				table = append(table, cmp)
				misses = append(misses, cmp.failures()...)
				if r := cmp.ratio(); cmp.connector.ran() && cmp.raw.ran() && r < *readTarget {
					misses = append(misses, fmt.Sprintf("%s: source/raw %.2f < %.2f", c, r, *readTarget))
				}
				// Judged at equal streams only: the prototype reads 10 per
				// subscription and cannot split, so the multi-split cases
				// compare different means and are reported, not judged.
				if v := cmp.vsPrototype(); cmp.prot.ran() && cmp.atProtoStreams.ran() && v <= 1 {
					misses = append(misses, fmt.Sprintf("%s: the source at the prototype's %d streams/sub does not beat it (%.2fx)", c, prototypeStreams, v))
				}
			}
		case "write":
			for _, c := range writeCases() {
				if !strings.Contains(c.String(), *only) {
					continue
				}
				cmp, err := compareWrite(ctx, env, c)
				if err != nil {
					return fail(err)
				}
				fmt.Print(cmp.detail())
				table = append(table, cmp)
				misses = append(misses, cmp.failures()...)
				if r := cmp.ratio(); cmp.connector.ran() && cmp.raw.ran() && r < *writeTarget {
					misses = append(misses, fmt.Sprintf("%s: sink/raw %.2f < %.2f", c, r, *writeTarget))
				}
			}
		case "latency":
			r, err := measureLatency(ctx, env, *latencyRate, *latencySeconds, 1024)
			if err != nil {
				return fail(err)
			}
			fmt.Println(r)
			fmt.Fprintf(&report, "\n%s\n", r)
		case "destinations":
			r, missed, err := measureEmulatorDestinations(ctx, env)
			if err != nil {
				return fail(err)
			}
			report.WriteString(r)
			misses = append(misses, missed...)
		case "windows":
			r, err := measureWindows(ctx, env, *windowsRate, *windowsSeconds, *windowsBacklog)
			if err != nil {
				return fail(err)
			}
			report.WriteString(r)
		case "scaling":
			points, err := measureScaling(ctx, env, 1024, *scalingMessages, *scalingRuns)
			if err != nil {
				return fail(err)
			}
			fmt.Fprintf(&report, "\n%s", scalingTable(points))
		case "typed":
			r, missed, err := measureTyped(ctx, *typedMessages, *runs, typedTargets{general: *typedTarget, avroDecode: *typedAvroDecodeTarget})
			if err != nil {
				return fail(err)
			}
			report.WriteString(r)
			misses = append(misses, missed...)
		case "stages":
			r, err := measureStages(ctx, *stageWait)
			if err != nil {
				return fail(err)
			}
			report.WriteString(r)
		case "saturation":
			r, missed, err := measureSaturation(ctx)
			if err != nil {
				return fail(err)
			}
			report.WriteString(r)
			misses = append(misses, missed...)
		case "flink":
			r, missed, err := measureFlink(ctx)
			if err != nil {
				return fail(err)
			}
			report.WriteString(r)
			misses = append(misses, missed...)
		case "dedup":
			r, err := measureDedup(ctx, env, *dedupMessages, *dedupSize)
			if err != nil {
				return fail(err)
			}
			report.WriteString(r.String())
		case "tracing":
			r, err := measureTracing(ctx, env, *tracingMessages, 1024)
			if err != nil {
				return fail(err)
			}
			report.WriteString(r.String())
		case "memory":
			rs, err := measureMemory(ctx, env, 1024, *memoryHold)
			if err != nil {
				return fail(err)
			}
			report.WriteString("\n| held | message | pubsubio RSS growth | raw client RSS growth | ratio |\n|---|---|---|---|---|\n")
			for _, r := range rs {
				fmt.Fprintln(&report, r)
			}
		default:
			if err := fmt.Errorf("unknown case %q in --cases; use read, write, destinations, latency, windows, scaling, memory, stages, typed, dedup, tracing, saturation, flink", what); err != nil {
				return fail(err)
			}
		}
	}

	fmt.Printf("\n== results (%d runs per contender, medians)\n", *runs)
	if len(table) > 0 {
		fmt.Println(tableHeader)
		for _, c := range table {
			fmt.Println(c.tableRow())
		}
	}
	fmt.Print(report.String())
	if err := figures.write(*figuresPath); err != nil {
		return fail(err)
	}
	if *memProfile != "" {
		f, err := os.Create(*memProfile)
		if err != nil {
			return fail(err)
		}
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
		if err != nil {
			return fail(err)
		}
	}
	if len(misses) > 0 {
		fmt.Println("\nBELOW TARGET:")
		for _, m := range misses {
			fmt.Println("  " + m)
		}
		return 2
	}
	return 0
}

// needsEmulator reports whether any of cases runs against the emulator:
// stages, typed, saturation and flink do not.
func needsEmulator(cases string) bool {
	for _, c := range strings.Split(cases, ",") {
		if c = strings.TrimSpace(c); c != "stages" && c != "typed" && c != "saturation" && c != "flink" {
			return true
		}
	}
	return false
}

func readCases() []readCase {
	var cs []readCase
	for _, size := range []int{1024, 16384} {
		n := *readMessages
		if size > 1024 {
			n = *readMessagesLarge
		}
		for _, subs := range []int{1, 3} {
			for _, splits := range []int{1, 4} {
				cs = append(cs, readCase{size: size, splitsPerSub: splits, subs: subs, messages: n})
			}
		}
	}
	return cs
}

func writeCases() []writeCase {
	var cs []writeCase
	for _, size := range []int{1024, 65536} {
		n, proto := *writeMessages, *protoMessages
		if size > 1024 {
			n, proto = *writeMessages64k, *protoMessages64k
		}
		for _, topics := range []int{1, 20} {
			cs = append(cs, writeCase{size: size, topics: topics, messages: n, protoMsgs: proto})
		}
	}
	return cs
}

// selected keeps the contenders --contenders names, all when it is empty.
func selected[T any](all []T, name func(T) string) []T {
	if *entrants == "" {
		return all
	}
	var keep []T
	for _, k := range all {
		for _, want := range strings.Split(*entrants, ",") {
			if strings.TrimSpace(want) == name(k) {
				keep = append(keep, k)
			}
		}
	}
	return keep
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "bench:", err)
	return 1
}
