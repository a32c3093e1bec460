package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source"
)

// satReadCase is one read case at saturation: one subscription read by
// splits, each with streams streaming pulls.
type satReadCase struct {
	readCase
	streams int
}

func (c satReadCase) String() string {
	return fmt.Sprintf("read %d B, %d split(s) x %d stream(s), %d msgs", c.size, c.splitsPerSub, c.streams, c.messages)
}

// window is each stream's flow control in the case as the source sets it
// at its default budget (source.Config.MaxOutstandingMessages: each
// stream's share of the budget, at most the default window), so the raw
// client reads with the same.
func (c satReadCase) window() (messages, bytes int) {
	streams := c.subs * c.splitsPerSub * c.streams
	messages = min(source.DefaultMaxOutstandingMessages, source.DefaultBufferMaxMessages/streams)
	if *satSourceOutstanding != 0 {
		messages = *satSourceOutstanding
	}
	return messages, int(min(source.DefaultMaxOutstandingBytes, source.DefaultBufferMaxBytes/int64(streams)))
}

func satReadCases() []satReadCase {
	var cs []satReadCase
	for _, size := range []int{1024, 16384} {
		n := *satReadMessages
		if size > 1024 {
			n = *satReadMessages16k
		}
		for _, splits := range []int{1, 4} {
			for _, streams := range []int{1, 4} {
				cs = append(cs, satReadCase{readCase: readCase{size: size, splitsPerSub: splits, subs: 1, messages: n}, streams: streams})
			}
		}
	}
	return cs
}

// compareSatRead reads the same backlog with the source on Prism in
// process, with the source on the standalone Prism (this process the
// worker) and with raw Receive loops at the same streams; interleaved,
// rotating who goes first. Every run must leave every message acked
// exactly once. It returns the case's table row and what missed a target.
func (r *satRig) compareSatRead(ctx context.Context, c satReadCase) (string, []string, error) {
	inProcess, worker, raw := &contender{}, &contender{}, &contender{}
	type entrant struct {
		name string
		who  *contender
		read func(context.Context, []pair) (float64, error)
	}
	cfg := pubsubio.ReadConfig{ParallelPullCount: c.streams, MaxOutstandingMessages: *satSourceOutstanding}
	contenders := selected([]entrant{
		{"source", inProcess, func(ctx context.Context, ps []pair) (float64, error) {
			return readWithSourceConfig(ctx, r.local, c.readCase, ps, cfg, sourceOptions{ownBudget: true})
		}},
		{"source-worker", worker, func(ctx context.Context, ps []pair) (float64, error) {
			return readWithSourceConfig(ctx, r.worker, c.readCase, ps, cfg, sourceOptions{ownBudget: true})
		}},
		{"raw", raw, func(ctx context.Context, ps []pair) (float64, error) {
			rs := receiveSettings
			rs.NumGoroutines = c.streams
			rs.MaxOutstandingMessages, rs.MaxOutstandingBytes = c.window()
			return readRawStreams(ctx, r.local, c.readCase, ps, rs)
		}},
	}, func(k entrant) string { return k.name })
	fmt.Println(c)
	for run := range *runs {
		for i := range contenders {
			k := contenders[(i+run)%len(contenders)]
			ps, err := r.local.newPairs(ctx, "sat", c.subs)
			if err != nil {
				return "", nil, err
			}
			if err := r.local.backlog(ctx, ps, c.messages, c.size); err != nil {
				return "", nil, err
			}
			s, err := measured(k.name, c.total(), func() (float64, error) { return k.read(ctx, ps) })
			var st satStats
			if err == nil {
				st, err = r.verify(ctx, ps, c.total())
			}
			r.local.drop(ctx, ps)
			if err != nil {
				k.who.fail(k.name, run, err)
				continue
			}
			fmt.Printf("  %-14s %8.0f msg/s  cpu %6s µs/msg  prism %6s  server %6s  allocs %6.1f/msg  (deliveries %d, expired %d, ack RPCs %d)\n",
				k.name, s.rate, micros(s.cpu), micros(s.runner), micros(s.emulator), s.allocs, st.Deliveries, st.Expired, st.AckRequests)
			k.who.add(s)
		}
	}
	var misses []string
	for _, k := range contenders {
		if f := k.who.failures; len(f) > 0 {
			misses = append(misses, fmt.Sprintf("%s: %s failed %d of %d runs (first: %v)", c, k.name, len(f), len(f)+len(k.who.samples), f[0]))
		}
	}
	vsRaw := per(worker.rate(), raw.rate())
	inVsRaw := per(inProcess.rate(), raw.rate())
	cpu := per(float64(worker.cpu()), float64(raw.cpu()))
	allocs := per(worker.allocs(), raw.allocs())
	misses = append(misses, judge(c.String(),
		judgement{"worker/raw msg/s", vsRaw, *satReadTarget, false},
		judgement{"in-process/raw msg/s", inVsRaw, *satInProcessTarget, false},
		judgement{"worker/raw CPU per message", cpu, *satReadCPUTarget, true},
		judgement{"worker/raw allocations per message", allocs, *satAllocTarget, true},
	)...)
	row := fmt.Sprintf("| %s | %.0f | %.0f (**%.2f**) | %.0f (**%.2f**) | %s / %s (**%.2f**) | %s | %s / %s | %s | %.0f / %.0f (**%.2f**) |\n",
		strings.TrimPrefix(c.String(), "read "), raw.rate(), worker.rate(), vsRaw, inProcess.rate(), inVsRaw,
		micros(worker.cpu()), micros(raw.cpu()), cpu, micros(inProcess.cpu()),
		micros(worker.runnerCPU()), micros(inProcess.runnerCPU()),
		micros(raw.emulatorCPU()), worker.allocs(), raw.allocs(), allocs)
	c.draw(raw, worker)
	return row, misses, nil
}

// draw puts the case's medians on the read figures: rate and worker CPU
// per message against the streams in all, a curve per contender and
// split count.
func (c satReadCase) draw(raw, worker *contender) {
	size := fmt.Sprintf("%d KiB", c.size/1024)
	streams := float64(c.splitsPerSub * c.streams)
	for _, k := range []struct {
		name string
		who  *contender
	}{{"raw client", raw}, {"pubsubio, worker", worker}} {
		series := fmt.Sprintf("%s, %d split(s)", k.name, c.splitsPerSub)
		figures.add("read-rate-"+strings.ReplaceAll(size, " ", ""), "Read "+size+" at saturation ("+*satShapeName+" server)", "streams (splits x streams per split)", "msg/s", series, streams, k.who.rate())
		figures.add("read-cpu-"+strings.ReplaceAll(size, " ", ""), "Worker CPU per message read, "+size+" ("+*satShapeName+" server)", "streams (splits x streams per split)", "CPU µs per message", series, streams, microsOf(k.who.cpu()))
	}
}

const satReadHeader = "\n| read | raw msg/s | worker out of process msg/s (/raw) | Prism in process msg/s (/raw) | CPU µs/msg worker / raw (ratio) | CPU µs/msg in process (with Prism) | standalone Prism CPU µs/msg (worker run / in-process run) | server CPU µs/msg (raw) | allocs/msg worker / raw (ratio) |\n" +
	"|---|---|---|---|---|---|---|---|---|\n"

// measureBundleCurve reads 1 KiB with the source, worker out of process,
// one split of 4 streams, at several MaxRecordsPerBundle: what bigger
// bundles save per message at saturation.
func (r *satRig) measureBundleCurve(ctx context.Context) (string, error) {
	var b strings.Builder
	c := readCase{size: 1024, splitsPerSub: 1, subs: 1, messages: *satReadMessages}
	for _, max := range []int{100, 300, 1000, 3000} {
		name := fmt.Sprintf("MaxRecordsPerBundle %d", max)
		if !strings.Contains("bundle "+name, *only) {
			continue
		}
		var k contender
		for run := range *runs {
			ps, err := r.local.newPairs(ctx, "satb", 1)
			if err != nil {
				return "", err
			}
			if err := r.local.backlog(ctx, ps, c.messages, c.size); err != nil {
				return "", err
			}
			s, err := measured("source-worker", c.total(), func() (float64, error) {
				return readWithSourceConfig(ctx, r.worker, c, ps, pubsubio.ReadConfig{ParallelPullCount: 4, MaxRecordsPerBundle: max}, sourceOptions{})
			})
			if err == nil {
				_, err = r.verify(ctx, ps, c.total())
			}
			r.local.drop(ctx, ps)
			if err != nil {
				k.fail(name, run, err)
				continue
			}
			fmt.Printf("  bundle %-26s %8.0f msg/s  cpu %6s µs/msg\n", name, s.rate, micros(s.cpu))
			k.add(s)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %.1f |\n", name, k.rate(), micros(k.cpu()), micros(k.runnerCPU()), k.allocs())
		title := "Bundle size at saturation, 1 KiB, 1 split x 4 streams (" + *satShapeName + " server)"
		figures.add("bundle-size-rate", title, "MaxRecordsPerBundle", "msg/s", "pubsubio, worker", float64(max), k.rate())
		figures.add("bundle-size-cpu", title, "MaxRecordsPerBundle", "CPU µs per message", "worker", float64(max), microsOf(k.cpu()))
		figures.add("bundle-size-cpu", title, "MaxRecordsPerBundle", "CPU µs per message", "standalone Prism", float64(max), microsOf(k.runnerCPU()))
	}
	if b.Len() == 0 {
		return "", nil
	}
	return "\n| bundle size curve (1 KiB, 1 split x 4 streams, worker out of process) | msg/s | CPU µs/msg worker | standalone Prism CPU µs/msg | allocs/msg |\n|---|---|---|---|---|\n" + b.String(), nil
}
