package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamflink "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"

	"github.com/pubsubio/beam-pubsubio/integration/flink"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

var (
	flinkIntervals    = flag.String("flink_intervals", "1s,2s,5s", "checkpoint intervals of the flink case (comma separated)")
	flinkParallelisms = flag.String("flink_parallelisms", "1,2", "Flink parallelisms of the flink case (comma separated); the read has as many splits")
	flinkMessages     = flag.Int("flink_messages", 100000, "messages of 1 KiB per backlog read of the flink case")
	flinkRate         = flag.Int("flink_rate", 1000, "msg/s of 1 KiB fed to the flink case's ack-latency runs")
	flinkSeconds      = flag.Int("flink_seconds", 20, "how long each ack-latency run of the flink case is fed")
	flinkBundle       = flag.Int("flink_max_records_per_bundle", 0, "MaxRecordsPerBundle of the read on Flink (0: the default)")
	flinkBuffer       = flag.Int("flink_buffer_max_messages", 0, "BufferMaxMessages of the read on Flink (0: the default)")
	flinkBufferBytes  = flag.Int64("flink_buffer_max_bytes", 0, "BufferMaxBytes of the read on Flink (0: the default)")
	flinkWrites       = flag.Int("flink_write_messages", 100000, "messages of 1 KiB per write run of the flink case, to one topic")
	flinkWebRefresh   = flag.Duration("flink_web_refresh", 0, "web.refresh-interval of every Flink of the flink case: how stale the checkpoint statistics the read polls may be (0: Flink's default, 3 s)")
	flinkSession      = flag.Bool("flink_session", true, "also run the flink case on a session cluster of two TaskManagers with PROCESS workers, checkpoints at the first of --flink_intervals")
)

// flinkRun is one Flink job reading from the saturation server.
type flinkRun struct {
	f       *flink.Flink
	job     string // --job_name, by which the read finds its checkpoints
	restore func() // puts Beam's job flags back (submitTo)
	done    chan struct{}
	err     error // how the submission ended, once done is closed
}

// startOnFlink submits a pipeline reading ps with splits splits to f, and
// waits until Flink runs it. The read's output goes to a stage that counts
// nothing (no run is registered): the server's acks tell the run.
func (r *satRig) startOnFlink(ctx context.Context, f *flink.Flink, ps []pair, splits int) (*flinkRun, error) {
	fr := &flinkRun{f: f, job: fmt.Sprintf("pubsubio-bench-%d", time.Now().UnixNano()), done: make(chan struct{})}
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions:       subsOf(ps),
		Splits:              splits,
		Connection:          r.local.conn,
		Commit:              pubsubio.CommitFlinkCheckpoint,
		Flink:               pubsubio.FlinkCheckpoints{REST: f.REST.Addr, Job: fr.job},
		MaxRecordsPerBundle: *flinkBundle,
		BufferMaxMessages:   *flinkBuffer,
		BufferMaxBytes:      *flinkBufferBytes,
	})
	endStage(s, beam.ParDo(s, &countMessagesFn{}, msgs))
	var err error
	if fr.restore, err = submitTo(f, fr.job); err != nil {
		return nil, err
	}
	go func() {
		_, fr.err = beamflink.Execute(ctx, p)
		close(fr.done)
	}()
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := f.REST.AwaitRunningJob(waitCtx); err != nil {
		return fr, fmt.Errorf("%w\n--- job server log ---\n%s", err, f.Log("jobserver", 4000))
	}
	return fr, nil
}

// stop cancels the job and waits for its submission to end.
func (fr *flinkRun) stop(ctx context.Context) error {
	defer fr.restore()
	jobs, err := fr.f.REST.Jobs(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.State == "RUNNING" {
			if err := fr.f.REST.Cancel(ctx, j.ID); err != nil {
				return err
			}
		}
	}
	select {
	case <-fr.done: // a cancelled job ends Execute with the cancellation
		return nil
	case <-time.After(time.Minute):
		return errors.New("the cancelled Flink job did not end within a minute")
	}
}

// readBacklogOnFlink reads a backlog of c.total() messages on f, once
// the server saw every one acked, and returns the workers' peak RSS too.
func (r *satRig) readBacklogOnFlink(ctx context.Context, f *flink.Flink, c readCase) (flinkSample, int64, error) {
	ps, err := r.local.newPairs(ctx, "flinkb", 1)
	if err != nil {
		return flinkSample{}, 0, err
	}
	defer r.local.drop(ctx, ps)
	if err := r.local.backlog(ctx, ps, c.messages, c.size); err != nil {
		return flinkSample{}, 0, err
	}
	tr, peak := traceOn(f), workerRSS(f)
	fr, err := r.startOnFlink(ctx, f, ps, c.splitsPerSub)
	if err == nil {
		err = r.awaitAcked(ctx, ps, c.total(), fr, 5*time.Minute)
	}
	tr.end()
	rss := peak()
	if fr == nil {
		return flinkSample{}, 0, err
	}
	st, verr := r.verify(ctx, ps, c.total())
	return readSample(tr, st, c.total()), rss, errors.Join(err, verr, fr.stop(ctx))
}

// ackLatency feeds a fresh subscription at --flink_rate for --flink_seconds
// while a job on f (or, when f is nil, on the standalone Prism) reads it
// with splits splits, and returns what the server saw, publish-to-ack
// latencies included.
func (r *satRig) ackLatency(ctx context.Context, f *flink.Flink, splits int) (satStats, error) {
	ps, err := r.local.newPairs(ctx, "flinkl", 1)
	if err != nil {
		return satStats{}, err
	}
	defer r.local.drop(ctx, ps)
	n := *flinkRate * *flinkSeconds
	pub := r.local.client.Publisher(ps[0].topic.String())
	defer pub.Stop()
	if f == nil {
		ran := make(chan error, 1)
		go func() { // bounded by idleness once the feed ends
			c := readCase{size: 1024, splitsPerSub: splits, subs: 1, messages: n}
			_, err := readWithSourceConfig(ctx, r.worker, c, ps, pubsubio.ReadConfig{}, sourceOptions{ownBudget: true})
			ran <- err
		}()
		err = errors.Join(feed(ctx, pub, n, *flinkRate, 1024), <-ran)
	} else {
		fr, err := r.startOnFlink(ctx, f, ps, splits)
		if err != nil {
			if fr != nil {
				err = errors.Join(err, fr.stop(ctx))
			}
			return satStats{}, err
		}
		// Fed once every split pulls: a PROCESS worker takes seconds to
		// start, and publish to ack would count them.
		err = r.await(ctx, ps, fr, 2*time.Minute, fmt.Sprintf("%d pull streams", splits), func(st satStats) bool { return st.PullStreams >= splits })
		if err == nil {
			err = feed(ctx, pub, n, *flinkRate, 1024)
		}
		if err == nil {
			err = r.awaitAcked(ctx, ps, n, fr, 2*time.Minute)
		}
		st, verr := r.verify(ctx, ps, n)
		return st, errors.Join(err, verr, fr.stop(ctx))
	}
	st, verr := r.verify(ctx, ps, n)
	return st, errors.Join(err, verr)
}

// measureFlink reads from the saturation server on Flink's embedded
// cluster at each checkpoint interval and parallelism, and on a session
// cluster at the first interval (--flink_session), beside the standalone
// Prism and the raw client at the same splits: the backlog read's rate and
// CPU, and publish-to-ack latency at a steady feed; then the write.
func measureFlink(ctx context.Context) (string, []string, error) {
	intervals, err := positives(*flinkIntervals, time.ParseDuration)
	if err != nil {
		return "", nil, fmt.Errorf("--flink_intervals: %w", err)
	}
	pars, err := positives(*flinkParallelisms, strconv.Atoi)
	if err != nil {
		return "", nil, fmt.Errorf("--flink_parallelisms: %w", err)
	}
	r, err := startSatRig(ctx)
	if err != nil {
		return "", nil, err
	}
	defer r.stop()
	if *flinkSession {
		dir, err := os.MkdirTemp("", "bench-boot")
		if err != nil {
			return "", nil, err
		}
		defer os.RemoveAll(dir)
		if err := buildBoot(ctx, dir); err != nil {
			return "", nil, err
		}
	}
	// CPU over the span the server saw each run work (cpuTrace): on Flink
	// a read's output leaves in bursts at checkpoints, so the span between
	// the first and the last message counted downstream is not the read's.
	steady = nil
	var b strings.Builder
	var misses []string
	fmt.Fprintf(&b, "\n== flink (%v; backlog %d msgs of 1 KiB, feed %d msg/s for %d s; one run per point; CPU per message from the server's first delivery to its last ack, or its first Publish to its last)\n\n", r.shape, *flinkMessages, *flinkRate, *flinkSeconds)
	b.WriteString("| runner | parallelism (splits) | backlog msg/s (server's deliveries) | worker CPU µs/msg | runner CPU µs/msg (Prism, Flink's JVMs) | ack latency p50 / p99 at the feed | workers' peak RSS in the backlog read, MiB |\n|---|---|---|---|---|---|---|\n")
	writes, err := r.flinkWrites(ctx, pars)
	if err != nil {
		misses = append(misses, fmt.Sprintf("flink writes: %v", err))
	}
	for _, par := range pars {
		c := readCase{size: 1024, splitsPerSub: par, subs: 1, messages: *flinkMessages}
		row, err := r.baselines(ctx, c)
		if err != nil {
			misses = append(misses, fmt.Sprintf("flink baselines, parallelism %d: %v", par, err))
		}
		b.WriteString(row)
		points := []flinkCluster{}
		for _, iv := range intervals {
			points = append(points, flinkCluster{interval: iv})
		}
		if *flinkSession {
			points = append(points, flinkCluster{interval: intervals[0], session: true})
		}
		for _, k := range points {
			row, err := r.flinkPoint(ctx, c, k)
			if err != nil {
				fmt.Printf("  %s, parallelism %d: %v\n", k, par, err)
				misses = append(misses, fmt.Sprintf("%s, parallelism %d: %v", k, par, err))
				continue
			}
			b.WriteString(row)
			fmt.Print(row)
		}
	}
	return b.String() + writes, misses, nil
}

// flinkCluster is a Flink the flink case starts.
type flinkCluster struct {
	interval time.Duration // checkpoints; 0: none
	session  bool          // a session cluster with PROCESS workers, else the embedded one
}

func (k flinkCluster) String() string {
	name := "Flink"
	if k.session {
		name = "Flink session, 2 TaskManagers, PROCESS workers"
	}
	if k.interval == 0 {
		return name
	}
	return fmt.Sprintf("%s, checkpoints every %v", name, k.interval)
}

// launch starts k at parallelism par in dir.
func (k flinkCluster) launch(ctx context.Context, dir string, par int) (*flink.Flink, error) {
	o := flink.Options{CheckpointInterval: k.interval, Parallelism: par, Session: k.session, SpreadTasks: k.session}
	if *flinkWebRefresh > 0 {
		o.Conf = map[string]string{"web.refresh-interval": fmt.Sprint((*flinkWebRefresh).Milliseconds())}
	}
	return flink.Launch(ctx, dir, o)
}

// flinkWrites writes --flink_write_messages to one topic with the sink on
// Flink (checkpoints off: a bounded write then ends), embedded and, with
// --flink_session, on a session cluster, at each parallelism, beside the
// sink on the standalone Prism and the raw publisher; one run each. Rate
// and CPU are over the server's first Publish call to its last
// (writeSample). It returns their table.
func (r *satRig) flinkWrites(ctx context.Context, pars []int) (string, error) {
	c := writeCase{size: 1024, topics: 1, messages: *flinkWrites}
	b := fmt.Sprintf("\n| write 1 KiB, one topic, %d msgs | msg/s (server's first to last Publish) | worker CPU µs/msg | Flink's JVMs CPU µs/msg | msgs per Publish |\n|---|---|---|---|---|\n", c.messages)
	row := func(name string, e *env, write func(context.Context, *env, writeCase, []pair) (float64, error)) error {
		ps, err := r.local.newPairs(ctx, "flinkw", 1)
		if err != nil {
			return err
		}
		defer r.local.drop(ctx, ps)
		tr := traceOn(e.flink)
		_, err = write(ctx, e, c, ps)
		tr.end()
		var st satStats
		if err == nil {
			st, err = r.publishedTo(ctx, ps, c.messages)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		s := writeSample(tr, st, c.messages)
		runner := "-"
		if e.flink != nil {
			runner = micros(s.runner)
		}
		b += fmt.Sprintf("| %s | %.0f | %s | %s | %.1f |\n", name, s.rate, micros(s.worker), runner, float64(c.messages)/float64(st.PublishCalls))
		return nil
	}
	if err := row("raw publisher", r.local, writeRaw); err != nil {
		return b, err
	}
	if err := row("sink, Prism, worker out of process", r.worker, writeWithSink); err != nil {
		return b, err
	}
	kinds := []flinkCluster{{}}
	if *flinkSession {
		kinds = append(kinds, flinkCluster{session: true})
	}
	for _, k := range kinds {
		for _, par := range pars {
			dir, err := os.MkdirTemp("", "bench-flink")
			if err != nil {
				return b, err
			}
			f, err := k.launch(ctx, dir, par)
			if err == nil {
				e := *r.local
				e.flink = f
				err = row(fmt.Sprintf("sink, %s, parallelism %d", k, par), &e, writeWithSink)
				err = errors.Join(err, f.Stop())
			}
			os.RemoveAll(dir)
			if err != nil {
				return b, err
			}
		}
	}
	fmt.Print(b)
	return b, nil
}

// baselines are the raw client's and the standalone Prism's rows for c.
func (r *satRig) baselines(ctx context.Context, c readCase) (string, error) {
	var b strings.Builder
	for _, k := range []struct {
		name string
		read func(context.Context, []pair) (float64, error)
	}{
		{"raw client", func(ctx context.Context, ps []pair) (float64, error) {
			return readRawStreams(ctx, r.local, c, ps, receiveSettings)
		}},
		{"Prism, worker out of process", func(ctx context.Context, ps []pair) (float64, error) {
			return readWithSourceConfig(ctx, r.worker, c, ps, pubsubio.ReadConfig{}, sourceOptions{ownBudget: true})
		}},
	} {
		ps, err := r.local.newPairs(ctx, "flinkr", 1)
		if err != nil {
			return b.String(), err
		}
		err = r.local.backlog(ctx, ps, c.messages, c.size)
		var s flinkSample
		if err == nil {
			tr := traceOn(nil)
			_, err = k.read(ctx, ps)
			var st satStats
			if err == nil {
				st, err = r.verify(ctx, ps, c.total())
			}
			tr.end()
			s = readSample(tr, st, c.total())
		}
		r.local.drop(ctx, ps)
		if err != nil {
			return b.String(), fmt.Errorf("%s: %w", k.name, err)
		}
		latency, runner := "-", "-"
		if k.name != "raw client" {
			st, err := r.ackLatency(ctx, nil, c.splitsPerSub)
			if err != nil {
				return b.String(), fmt.Errorf("%s ack latency: %w", k.name, err)
			}
			latency = fmt.Sprintf("%v / %v", st.AckLatencyP50.Round(time.Millisecond), st.AckLatencyP99.Round(time.Millisecond))
			runner = micros(s.runner)
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s | %s | - |\n", k.name, c.splitsPerSub, s.rate, micros(s.worker), runner, latency)
	}
	fmt.Print(b.String())
	return b.String(), nil
}

// flinkPoint starts k at c's parallelism, measures a backlog read and the
// ack latency on it, and stops it.
func (r *satRig) flinkPoint(ctx context.Context, c readCase, k flinkCluster) (string, error) {
	dir, err := os.MkdirTemp("", "bench-flink")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	f, err := k.launch(ctx, dir, c.splitsPerSub)
	if err != nil {
		return "", err
	}
	defer f.Stop()
	s, peakRSS, err := r.readBacklogOnFlink(ctx, f, c)
	if err != nil {
		return "", err
	}
	st, err := r.ackLatency(ctx, f, c.splitsPerSub)
	if err != nil {
		return "", err
	}
	if !k.session {
		title := fmt.Sprintf("Publish to ack on Flink at %d msg/s (%s server)", *flinkRate, *satShapeName)
		figures.add("flink-ack-latency", title, "checkpoint interval (s)", "s", fmt.Sprintf("p99, parallelism %d", c.splitsPerSub), k.interval.Seconds(), st.AckLatencyP99.Seconds())
		figures.add("flink-ack-latency", title, "checkpoint interval (s)", "s", fmt.Sprintf("p50, parallelism %d", c.splitsPerSub), k.interval.Seconds(), st.AckLatencyP50.Seconds())
		figures.add("flink-backlog-rate", fmt.Sprintf("Backlog read on Flink, 1 KiB (%s server)", *satShapeName), "checkpoint interval (s)", "msg/s", fmt.Sprintf("parallelism %d", c.splitsPerSub), k.interval.Seconds(), s.rate)
	}
	return fmt.Sprintf("| %s | %d | %.0f | %s | %s | %v / %v | %d |\n", k, c.splitsPerSub, s.rate, micros(s.worker), micros(s.runner),
		st.AckLatencyP50.Round(time.Millisecond), st.AckLatencyP99.Round(time.Millisecond), peakRSS>>20), nil
}

// positives parses a comma-separated list of positive values with parse.
func positives[T int | time.Duration](list string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(list, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive %T", f, v)
		}
		out = append(out, v)
	}
	return out, nil
}
