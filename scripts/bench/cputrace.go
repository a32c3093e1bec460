package main

import (
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"
)

// traceEvery is how often a cpuTrace samples.
const traceEvery = 100 * time.Millisecond

// cpuTrace samples what a run's SDK worker and runner have spent, every
// traceEvery while the run goes on, so that the CPU of a span known only
// afterwards (the server's first delivery to its last ack) can be read off.
// The sampler's own CPU is left out of this process's.
type cpuTrace struct {
	mu     sync.Mutex
	points []cpuPoint
	stop   chan struct{}
	done   chan struct{}
}

// cpuPoint is what was spent by a moment.
type cpuPoint struct {
	at             time.Time
	worker, runner time.Duration
}

// traceCPU starts sampling spent, which returns what the worker and the
// runner have spent so far given this process's CPU without the sampler.
func traceCPU(spent func(self time.Duration) (worker, runner time.Duration)) *cpuTrace {
	t := &cpuTrace{stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(t.done)
		// RUSAGE_THREAD measures the sampler: keep it on one thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var overhead time.Duration
		sample := func() {
			from := threadCPU()
			worker, runner := spent(selfCPU() - overhead)
			p := cpuPoint{at: time.Now(), worker: worker, runner: runner}
			overhead += threadCPU() - from
			t.mu.Lock()
			t.points = append(t.points, p)
			t.mu.Unlock()
		}
		sample()
		close(ready)
		tick := time.NewTicker(traceEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				sample()
			case <-t.stop:
				sample()
				return
			}
		}
	}()
	<-ready
	return t
}

// end takes a last sample and stops the trace.
func (t *cpuTrace) end() {
	close(t.stop)
	<-t.done
}

// between is what was spent from from to to, each read off the samples
// around it by linear interpolation (clamped to the trace).
func (t *cpuTrace) between(from, to time.Time) (worker, runner time.Duration) {
	a, b := t.at(from), t.at(to)
	return b.worker - a.worker, b.runner - a.runner
}

func (t *cpuTrace) at(when time.Time) cpuPoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.points
	i := sort.Search(len(ps), func(i int) bool { return !ps[i].at.Before(when) })
	switch {
	case i == 0:
		return ps[0]
	case i == len(ps):
		return ps[len(ps)-1]
	}
	lo, hi := ps[i-1], ps[i]
	frac := float64(when.Sub(lo.at)) / float64(hi.at.Sub(lo.at))
	lerp := func(a, b time.Duration) time.Duration { return a + time.Duration(frac*float64(b-a)) }
	return cpuPoint{at: when, worker: lerp(lo.worker, hi.worker), runner: lerp(lo.runner, hi.runner)}
}

// threadCPU is the CPU the calling OS thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(rusageThread, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusageThread is Linux's RUSAGE_THREAD, which package syscall does not
// name.
const rusageThread = 1
