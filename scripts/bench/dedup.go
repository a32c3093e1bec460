package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// dedupResult is the dedup case: the same read counted directly and after
// Deduplicate, and the live heap each held when its last message arrived.
type dedupResult struct {
	messages, size  int
	plain, deduped  contender
	plainLive, live []float64 // bytes of live heap at the last message, per run
}

func (r dedupResult) String() string {
	extraCPU := r.deduped.cpu() - r.plain.cpu()
	perKey := (median(r.live) - median(r.plainLive)) / float64(r.messages)
	return fmt.Sprintf("\n| dedup case (%d messages of %d B, 1 split, %d runs each) | msg/s | CPU µs/msg |\n|---|---|---|\n"+
		"| Read -> count | %.0f | %s |\n| Read -> Deduplicate -> count | %.0f | %s |\n"+
		"| ratio (dedup / plain) | **%.2f** | +%s µs/msg |\n\nstate per key in Prism: %.0f B (live heap at the last message, with every key held, less the plain read's; medians %.1f / %.1f MiB)\n",
		r.messages, r.size, len(r.plain.samples),
		r.plain.rate(), micros(r.plain.cpu()), r.deduped.rate(), micros(r.deduped.cpu()),
		r.deduped.rate()/r.plain.rate(), micros(extraCPU),
		perKey, median(r.live)/(1<<20), median(r.plainLive)/(1<<20))
}

// measureDedup reads one fresh backlog per run and contender (one
// subscription, one split), counted right after the read and after
// Deduplicate keyed by Message.ID, interleaved, first one then the other.
// Deduplicate runs in event time, so every key stays in the runner's state
// until the bounded read ends, after the last message is counted: the live
// heap then, after a collection, less the plain read's at the same point,
// is what the keys hold in Prism (in-process here).
func measureDedup(ctx context.Context, e *env, messages, size int) (dedupResult, error) {
	r := dedupResult{messages: messages, size: size}
	c := readCase{size: size, splitsPerSub: 1, subs: 1, messages: messages}
	deduplicate := func(s beam.Scope, msgs beam.PCollection) beam.PCollection {
		return pubsubio.Deduplicate(s, pubsubio.DedupConfig{TimeDomain: pubsubio.DedupEventTime, Horizon: time.Hour}, msgs)
	}
	entrants := []struct {
		name    string
		who     *contender
		live    *[]float64
		through func(beam.Scope, beam.PCollection) beam.PCollection
	}{
		{"read", &r.plain, &r.plainLive, nil},
		{"read+dedup", &r.deduped, &r.live, deduplicate},
	}
	for run := range *runs {
		for i := range entrants {
			k := entrants[(i+run)%len(entrants)]
			ps, err := e.newPairs(ctx, "d", 1)
			if err != nil {
				return r, err
			}
			if err := e.backlog(ctx, ps, messages, size); err != nil {
				return r, err
			}
			var live uint64
			opts := sourceOptions{through: k.through, atTarget: func() {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				live = ms.HeapAlloc
			}}
			s, err := measured(k.name, messages, func() (float64, error) {
				return readWithSourceConfig(ctx, e, c, ps, pubsubio.ReadConfig{}, opts)
			})
			e.drop(ctx, ps)
			if err != nil {
				k.who.fail(k.name, run, err)
				continue
			}
			k.who.add(s)
			*k.live = append(*k.live, float64(live))
			fmt.Printf("  dedup case run %d: %-10s %8.0f msg/s  cpu %s µs/msg  live heap %.1f MiB\n", run+1, k.name, s.rate, micros(s.cpu), float64(live)/(1<<20))
		}
	}
	if !r.plain.ran() || !r.deduped.ran() {
		return r, fmt.Errorf("the dedup case did not complete a run of each contender")
	}
	return r, nil
}
