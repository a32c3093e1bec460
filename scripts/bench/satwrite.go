package main

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/sink"
)

func satWriteCases() []writeCase {
	var cs []writeCase
	for _, size := range []int{1024, 65536} {
		n := *satWriteMessages
		if size > 1024 {
			n = *satWriteMessages64
		}
		for _, topics := range []int{1, 20} {
			cs = append(cs, writeCase{size: size, topics: topics, messages: n})
		}
	}
	return cs
}

// publishedTo is what the server saw published to ps, in all.
func (r *satRig) publishedTo(ctx context.Context, ps []pair, want int) (satStats, error) {
	sum, err := r.statsOf(ctx, ps)
	if err != nil {
		return sum, err
	}
	if sum.Published != want {
		return sum, fmt.Errorf("the server saw %d of %d messages published", sum.Published, want)
	}
	return sum, nil
}

// writeRun is one measured write: fresh topics, the contender's run, the
// server's count checked; it returns the sample, its rate from the first
// message's creation to the last Publish call the server received, and
// the Publish RPCs.
func (r *satRig) writeRun(ctx context.Context, name string, c writeCase, write func(context.Context, []pair) (float64, error)) (sample, int, error) {
	ps, err := r.local.newPairs(ctx, "satw", c.topics)
	if err != nil {
		return sample{}, 0, err
	}
	defer r.local.drop(ctx, ps)
	s, err := measured(name, c.messages, func() (float64, error) { return write(ctx, ps) })
	if err != nil {
		return s, 0, err
	}
	st, err := r.publishedTo(ctx, ps, c.messages)
	if err == nil && steady.complete() {
		// From the first message's creation to the last Publish call the
		// server received: a pipeline's start-up and shutdown are
		// constants, not rates, and would dominate runs of a second.
		s.rate = float64(c.messages) / time.Unix(0, st.LastPublish).Sub(steady.from.at).Seconds()
	}
	return s, st.PublishCalls, err
}

// compareSatWrite publishes with the sink on Prism in process, with the
// sink on the standalone Prism and with raw Publishers; interleaved.
func (r *satRig) compareSatWrite(ctx context.Context, c writeCase) (string, []string, error) {
	inProcess, worker, raw := &contender{}, &contender{}, &contender{}
	type entrant struct {
		name  string
		who   *contender
		write func(context.Context, []pair) (float64, error)
	}
	contenders := selected([]entrant{
		{"sink", inProcess, func(ctx context.Context, ps []pair) (float64, error) { return writeWithSink(ctx, r.local, c, ps) }},
		{"sink-worker", worker, func(ctx context.Context, ps []pair) (float64, error) { return writeWithSink(ctx, r.worker, c, ps) }},
		{"raw", raw, func(ctx context.Context, ps []pair) (float64, error) { return writeRaw(ctx, r.local, c, ps) }},
	}, func(k entrant) string { return k.name })
	fmt.Println(c)
	var misses []string
	for run := range *runs {
		for i := range contenders {
			k := contenders[(i+run)%len(contenders)]
			s, rpcs, err := r.writeRun(ctx, k.name, c, k.write)
			if err != nil {
				k.who.fail(k.name, run, err)
				misses = append(misses, fmt.Sprintf("%s: %s run %d: %v", c, k.name, run+1, err))
				continue
			}
			fmt.Printf("  %-14s %8.0f msg/s  cpu %6s µs/msg  prism %6s  server %6s  allocs %6.1f/msg  (%.1f msgs per Publish)\n",
				k.name, s.rate, micros(s.cpu), micros(s.runner), micros(s.emulator), s.allocs, float64(c.messages)/float64(rpcs))
			k.who.add(s)
		}
	}
	vsRaw := per(worker.rate(), raw.rate())
	inVsRaw := per(inProcess.rate(), raw.rate())
	cpu := per(float64(worker.cpu()), float64(raw.cpu()))
	misses = append(misses, judge(c.String(),
		judgement{"worker/raw msg/s", vsRaw, *satWriteTarget, false},
		judgement{"worker/raw CPU per message", cpu, *satWriteCPUTarget, true},
	)...)
	row := fmt.Sprintf("| %s | %.0f | %.0f (**%.2f**) | %.0f (%.2f) | %s / %s (**%.2f**) | %s | %s | %.0f / %.0f |\n",
		strings.TrimPrefix(c.String(), "write "), raw.rate(), worker.rate(), vsRaw, inProcess.rate(), inVsRaw,
		micros(worker.cpu()), micros(raw.cpu()), cpu, micros(inProcess.cpu()), micros(worker.runnerCPU()),
		worker.allocs(), raw.allocs())
	return row, misses, nil
}

const satWriteHeader = "\n| write | raw msg/s | worker out of process msg/s (/raw) | Prism in process msg/s (/raw) | CPU µs/msg worker / raw (ratio) | CPU µs/msg in process (with Prism) | standalone Prism CPU µs/msg | allocs/msg worker / raw |\n" +
	"|---|---|---|---|---|---|---|---|\n"

// destinationsOf is the topic of each of n messages over topics: round
// robin, or skewed (Zipf, s 1.1: a few topics take most messages, a long
// tail the rest); the same sequence every run.
func destinationsOf(n, topics int, skewed bool) []int {
	out := make([]int, n)
	if !skewed || topics < 2 {
		for i := range out {
			out[i] = i % topics
		}
		return out
	}
	z := rand.NewZipf(rand.New(rand.NewSource(1)), 1.1, 1, uint64(topics-1))
	for i := range out {
		out[i] = int(z.Uint64())
	}
	return out
}

// measureDestinations writes with the sink, worker out of process, over 20,
// 300 and 1,000 topics, more than the sink's DefaultMaxActivePublishers
// for the last two, round robin and skewed.
func (r *satRig) measureDestinations(ctx context.Context) (string, []string, error) {
	var b strings.Builder
	var misses []string
	for _, skewed := range []bool{false, true} {
		var base float64
		for _, topics := range []int{20, 300, 1000} {
			c := writeCase{size: 1024, topics: topics, messages: *satDestMessages, skewed: skewed}
			name := fmt.Sprintf("%d topics, round robin", topics)
			if skewed {
				name = fmt.Sprintf("%d topics, skewed", topics)
			}
			if !strings.Contains("destinations "+name, *only) {
				continue
			}
			var k contender
			var rpcs []float64
			for run := range *runs {
				s, n, err := r.writeRun(ctx, "sink-destinations", c, func(ctx context.Context, ps []pair) (float64, error) {
					return writeWithSink(ctx, r.worker, c, ps)
				})
				if err != nil {
					k.fail(name, run, err)
					misses = append(misses, fmt.Sprintf("destinations %s run %d: %v", name, run+1, err))
					continue
				}
				fmt.Printf("  destinations %-26s %8.0f msg/s  %.1f msgs per Publish\n", name, s.rate, float64(c.messages)/float64(n))
				k.add(s)
				rpcs = append(rpcs, float64(c.messages)/float64(n))
			}
			if topics == 20 {
				base = k.rate()
			}
			share := per(k.rate(), base)
			if topics == 300 {
				misses = append(misses, judge("destinations "+name, judgement{"msg/s over 300 topics / over 20", share, *satDestTarget, false})...)
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.1f | %s |\n", name, k.rate(), share, median(rpcs), micros(k.cpu()))
		}
	}
	if b.Len() == 0 {
		return "", misses, nil
	}
	return fmt.Sprintf("\n| many destinations (1 KiB, %d msgs, MaxActivePublishers %d) | msg/s | / 20 topics | messages per Publish RPC | CPU µs/msg worker |\n|---|---|---|---|---|\n%s",
		*satDestMessages, sink.DefaultMaxActivePublishers, b.String()), misses, nil
}
