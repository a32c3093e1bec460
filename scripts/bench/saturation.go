package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"
)

var (
	satReadMessages    = flag.Int("sat_read_messages", 100000, "messages per read run of the saturation cases, 1 KiB")
	satReadMessages16k = flag.Int("sat_read_messages_16k", 10000, "the same, 16 KiB")
	satWriteMessages   = flag.Int("sat_write_messages", 200000, "messages per write run of the saturation cases, 1 KiB")
	satWriteMessages64 = flag.Int("sat_write_messages_64k", 10000, "the same, 64 KiB")
	satDestMessages    = flag.Int("sat_destination_messages", 30000, "messages per run of the many-destinations cases, 1 KiB")

	satSourceOutstanding = flag.Int("sat_source_outstanding", 0, "MaxOutstandingMessages of the source and the raw client in the saturation read cases (0: the source's default): how much a wider flow-control window gives")

	satReadTarget      = flag.Float64("sat_read_target", 0.8, "lowest acceptable source/raw msg/s at saturation, worker out of process")
	satInProcessTarget = flag.Float64("sat_in_process_target", 0.6, "lowest acceptable source/raw msg/s at saturation, Prism in process")
	satReadCPUTarget   = flag.Float64("sat_read_cpu_target", 1.5, "highest acceptable worker/raw CPU per message read at saturation")
	satAllocTarget     = flag.Float64("sat_alloc_target", 1.3, "highest acceptable worker/raw allocations per message read at saturation")
	satWriteTarget     = flag.Float64("sat_write_target", 0.9, "lowest acceptable sink/raw msg/s at saturation, worker out of process")
	satWriteCPUTarget  = flag.Float64("sat_write_cpu_target", 1.3, "highest acceptable worker/raw CPU per message written at saturation")
	satDestTarget      = flag.Float64("sat_destinations_target", 0.5, "lowest acceptable msg/s of the sink over 300 topics, as a share of its msg/s over 20")
)

// satRig is what the saturation cases run on: the saturation server and a
// standalone Prism, each a process of its own, and two views of them
// (pipelines on Prism in this process, or on the standalone Prism with
// this process as the worker).
type satRig struct {
	shape         satShape
	server        *satProcess
	prism         *prismProcess
	local, worker *env
}

func startSatRig(ctx context.Context) (*satRig, error) {
	shape, err := shapeFromFlags()
	if err != nil {
		return nil, err
	}
	srv, err := startSaturationServer()
	if err != nil {
		return nil, err
	}
	r := &satRig{shape: shape, server: srv}
	if r.prism, err = startPrism(ctx); err != nil {
		r.stop()
		return nil, err
	}
	if r.local, err = newEnv(ctx, srv.endpoint); err != nil {
		r.stop()
		return nil, err
	}
	w := *r.local
	w.jobServer = r.prism.endpoint
	r.worker = &w
	serverGroup, runnerGroup = srv.pid(), r.prism.pid()
	steady = &window{}
	return r, nil
}

func (r *satRig) stop() {
	serverGroup, runnerGroup, steady = 0, 0, nil
	if r.local != nil {
		r.local.close()
	}
	if r.prism != nil {
		r.prism.stop()
	}
	r.server.stop()
}

// verify waits, bounded, until the server saw every message of ps acked
// and nothing leased, and fails unless each was acked exactly once.
func (r *satRig) verify(ctx context.Context, ps []pair, want int) (satStats, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		sum, err := r.statsOf(ctx, ps)
		if err != nil {
			return sum, err
		}
		settled := sum.Unacked == 0 && sum.Outstanding == 0
		if settled || time.Now().After(deadline) {
			if !settled || sum.AckedTwice > 0 || sum.Published != want {
				return sum, fmt.Errorf("the server saw %d of %d messages published, %d acked, %d acked more than once, %d never acked, %d leased, %d leases expired", sum.Published, want, sum.Acked, sum.AckedTwice, sum.Unacked, sum.Outstanding, sum.Expired)
			}
			return sum, nil
		}
		select {
		case <-ctx.Done():
			return sum, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// statsOf is what the server saw on the subscriptions of ps, in all.
func (r *satRig) statsOf(ctx context.Context, ps []pair) (satStats, error) {
	var sum satStats
	for _, p := range ps {
		st, err := r.server.statsOf(ctx, p.sub.String())
		if err != nil {
			return sum, err
		}
		sum.add(st)
	}
	return sum, nil
}

// earliest is the earlier of two Unix times, 0 standing for none.
func earliest(a, b int64) int64 {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

func (s *satStats) add(o satStats) {
	s.Published += o.Published
	s.Acked += o.Acked
	s.AckedTwice += o.AckedTwice
	s.Unacked += o.Unacked
	s.Deliveries += o.Deliveries
	s.Expired += o.Expired
	s.Nacks += o.Nacks
	s.Extensions += o.Extensions
	s.StaleAcks += o.StaleAcks
	s.Outstanding += o.Outstanding
	s.AckRequests += o.AckRequests
	s.PullStreams += o.PullStreams
	s.PublishCalls += o.PublishCalls
	s.LastPublish = max(s.LastPublish, o.LastPublish)
	s.FirstPublish = earliest(s.FirstPublish, o.FirstPublish)
	s.FirstDelivery = earliest(s.FirstDelivery, o.FirstDelivery)
	s.LastDelivery = max(s.LastDelivery, o.LastDelivery)
	s.LastAck = max(s.LastAck, o.LastAck)
	s.AckLatencyP50 = max(s.AckLatencyP50, o.AckLatencyP50)
	s.AckLatencyP99 = max(s.AckLatencyP99, o.AckLatencyP99)
}

// measureSaturation runs the read, write and many-destinations cases
// against the saturation server and returns their tables and every case
// below its target.
func measureSaturation(ctx context.Context) (string, []string, error) {
	r, err := startSatRig(ctx)
	if err != nil {
		return "", nil, err
	}
	defer r.stop()
	var report strings.Builder
	var misses []string
	fmt.Fprintf(&report, "\n== saturation, %v (%d runs per contender, medians; CPU and allocations over each run's steady state)\n", r.shape, *runs)
	reads, missed, err := satTable(satReadHeader, satReadCases(), func(c satReadCase) (string, []string, error) { return r.compareSatRead(ctx, c) })
	if err != nil {
		return "", nil, err
	}
	report.WriteString(reads)
	misses = append(misses, missed...)
	curve, err := r.measureBundleCurve(ctx)
	if err != nil {
		return "", nil, err
	}
	report.WriteString(curve)
	writes, missed, err := satTable(satWriteHeader, satWriteCases(), func(c writeCase) (string, []string, error) { return r.compareSatWrite(ctx, c) })
	if err != nil {
		return "", nil, err
	}
	report.WriteString(writes)
	misses = append(misses, missed...)
	table, missed, err := r.measureDestinations(ctx)
	if err != nil {
		return "", nil, err
	}
	report.WriteString(table)
	misses = append(misses, missed...)
	return report.String(), misses, nil
}

// satTable compares the cases --only selects and returns their table under
// header ("" when none ran) and what missed a target.
func satTable[C fmt.Stringer](header string, cases []C, compare func(C) (string, []string, error)) (string, []string, error) {
	var rows strings.Builder
	var misses []string
	for _, c := range cases {
		if !strings.Contains(c.String(), *only) {
			continue
		}
		row, missed, err := compare(c)
		if err != nil {
			return "", nil, err
		}
		rows.WriteString(row)
		misses = append(misses, missed...)
	}
	if rows.Len() == 0 {
		return "", misses, nil
	}
	return header + rows.String(), misses, nil
}

// judgement is a ratio and its target: at most the target when atMost,
// else at least.
type judgement struct {
	what   string
	ratio  float64
	target float64
	atMost bool
}

// judge describes every judgement of the case name that misses its target.
func judge(name string, js ...judgement) []string {
	var misses []string
	for _, j := range js {
		if j.ratio == 0 {
			continue // a side did not run
		}
		if (j.atMost && j.ratio > j.target) || (!j.atMost && j.ratio < j.target) {
			rel := ">="
			if j.atMost {
				rel = "<="
			}
			misses = append(misses, fmt.Sprintf("%s: %s %.2f, target %s %.2f", name, j.what, j.ratio, rel, j.target))
		}
	}
	return misses
}

// deliveryRate is the messages per second the server sent: st's
// deliveries from its first to its last. On Flink a read's output leaves
// in bursts at checkpoints, so the rate downstream of the read says less.
func (st satStats) deliveryRate() float64 {
	if st.LastDelivery <= st.FirstDelivery {
		return 0
	}
	return float64(st.Deliveries) / time.Duration(st.LastDelivery-st.FirstDelivery).Seconds()
}

// per is a/b, 0 when either is missing.
func per(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a / b
}
