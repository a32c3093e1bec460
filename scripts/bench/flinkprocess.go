package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/pubsubio/beam-pubsubio/integration/flink"
)

// bootProgram is the Go SDK container's boot program, built by
// buildBoot: a session cluster's TaskManagers start their SDK workers
// with it (PROCESS).
var bootProgram string

// buildBoot builds the boot program into dir and sets bootProgram.
func buildBoot(ctx context.Context, dir string) error {
	bin := filepath.Join(dir, "boot")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/apache/beam/sdks/v2/go/container")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the Go SDK's boot program: %w", err)
	}
	bootProgram = bin
	return nil
}

// submitTo points Beam's job flags at f, with job as the job's name ("":
// Beam's default), and returns what puts them back. On the embedded
// cluster this process is the SDK worker (LOOPBACK); on a session cluster
// each TaskManager starts its own from this binary (PROCESS), where
// counting DoFns count nothing and the server's figures tell the run.
func submitTo(f *flink.Flink, job string) (restore func(), err error) {
	saved := []*string{jobopts.Endpoint, jobopts.EnvironmentType, jobopts.EnvironmentConfig, jobopts.WorkerBinary, jobopts.JobName}
	values := make([]string, len(saved))
	for i, p := range saved {
		values[i] = *p
	}
	restore = func() {
		for i, p := range saved {
			*p = values[i]
		}
	}
	*jobopts.Endpoint, *jobopts.JobName = f.Endpoint, job
	*jobopts.EnvironmentType, *jobopts.EnvironmentConfig, *jobopts.WorkerBinary = "LOOPBACK", "", ""
	if !f.Options().Session {
		return restore, nil
	}
	self, err := os.Executable()
	if err != nil {
		restore()
		return nil, fmt.Errorf("finding this binary, the Flink job's SDK worker: %w", err)
	}
	config, err := f.ProcessEnvironment(bootProgram, self)
	if err != nil {
		restore()
		return nil, err
	}
	*jobopts.EnvironmentType, *jobopts.EnvironmentConfig, *jobopts.WorkerBinary = "PROCESS", config, self
	return restore, nil
}

// flinkCPU is what f's JVMs and the SDK workers its TaskManagers started
// (boot and this binary, running or reaped) have spent so far. A LOOPBACK
// worker is this process, which measured counts.
func flinkCPU(f *flink.Flink) (jvms, workers time.Duration) {
	groups := f.ProcessGroups()
	for _, p := range procStats() {
		if !slices.Contains(groups, p.pgrp) {
			continue
		}
		if p.comm == "java" {
			jvms += p.own
			workers += p.children // a JVM here starts nothing but boot
		} else {
			workers += p.own + p.children
		}
	}
	return jvms, workers
}

// traceOn traces the CPU of a run on f (nil: the raw client or the
// standalone Prism): the worker is this process or, on a session
// cluster, the SDK worker processes; the runner Flink's JVMs or Prism.
func traceOn(f *flink.Flink) *cpuTrace {
	return traceCPU(func(self time.Duration) (worker, runner time.Duration) {
		if f == nil {
			return self, groupCPU(runnerGroup)
		}
		jvms, workers := flinkCPU(f)
		if f.Options().Session {
			return workers, jvms
		}
		return self, jvms
	})
}

// workerRSS samples, every 100 ms until the returned function is called,
// the resident memory of a run's SDK workers on f and returns its peak:
// this process on the embedded cluster (the LOOPBACK worker, with the
// bench's clients), the sum of the worker processes its TaskManagers
// started on a session cluster.
func workerRSS(f *flink.Flink) (peak func() int64) {
	sample := rss
	if f.Options().Session {
		groups := f.ProcessGroups()
		sample = func() int64 {
			var sum int64
			for _, p := range procStats() {
				if p.comm != "java" && slices.Contains(groups, p.pgrp) {
					sum += p.rss
				}
			}
			return sum
		}
	}
	return samplePeak(100*time.Millisecond, sample)
}

// flinkSample is one run of the flink case: its rate and what its worker
// and runner spent per message, each over the span the server saw it work.
type flinkSample struct {
	rate           float64
	worker, runner time.Duration
}

// readSample is a read of n messages traced by tr: the rate of the
// server's deliveries, CPU from the first delivery to the last ack.
func readSample(tr *cpuTrace, st satStats, n int) flinkSample {
	w, r := tr.between(time.Unix(0, st.FirstDelivery), time.Unix(0, st.LastAck))
	return flinkSample{rate: st.deliveryRate(), worker: w / time.Duration(n), runner: r / time.Duration(n)}
}

// writeSample is a write of n messages traced by tr: rate and CPU from the
// server's first Publish call to its last.
func writeSample(tr *cpuTrace, st satStats, n int) flinkSample {
	from, to := time.Unix(0, st.FirstPublish), time.Unix(0, st.LastPublish)
	w, r := tr.between(from, to)
	return flinkSample{rate: float64(n) / to.Sub(from).Seconds(), worker: w / time.Duration(n), runner: r / time.Duration(n)}
}

// await waits until the server's figures for ps satisfy ok, the job of fr
// ends, or limit passes; what names the wait in errors.
func (r *satRig) await(ctx context.Context, ps []pair, fr *flinkRun, limit time.Duration, what string, ok func(satStats) bool) error {
	deadline := time.After(limit)
	for {
		st, err := r.statsOf(ctx, ps)
		if err != nil {
			return err
		}
		if ok(st) {
			return nil
		}
		select {
		case <-fr.done:
			return fmt.Errorf("the Flink job ended before %s (the server saw %d messages acked, %d pull streams): %v", what, st.Acked, st.PullStreams, fr.err)
		case <-deadline:
			return fmt.Errorf("no %s in %v (the server saw %d messages acked, %d pull streams)", what, limit, st.Acked, st.PullStreams)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitAcked waits until the server saw n messages of ps acked.
func (r *satRig) awaitAcked(ctx context.Context, ps []pair, n int, fr *flinkRun, limit time.Duration) error {
	return r.await(ctx, ps, fr, limit, fmt.Sprintf("%d messages acked", n), func(st satStats) bool { return st.Acked >= n })
}
