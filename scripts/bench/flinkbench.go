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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	beamflink "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"

	"github.com/pubsubio/beam-pubsubio/integration/flink"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

var (
	flinkIntervals    = flag.String("flink_intervals", "1s,2s,5s", "checkpoint intervals of the flink case (comma separated)")
	flinkParallelisms = flag.String("flink_parallelisms", "1,2", "Flink parallelisms of the flink case (comma separated); the read has as many splits")
	flinkMessages     = flag.Int("flink_messages", 30000, "messages of 1 KiB per backlog read of the flink case")
	flinkRate         = flag.Int("flink_rate", 1000, "msg/s of 1 KiB fed to the flink case's ack-latency runs")
	flinkSeconds      = flag.Int("flink_seconds", 20, "how long each ack-latency run of the flink case is fed")
	flinkBundle       = flag.Int("flink_max_records_per_bundle", 0, "MaxRecordsPerBundle of the read on Flink (0: the default)")
	flinkWrites       = flag.Int("flink_write_messages", 100000, "messages of 1 KiB per write run of the flink case, to one topic")
)

// flinkRun is one Flink job reading from the saturation server, with this
// process as its LOOPBACK worker.
type flinkRun struct {
	f   *flink.Flink
	job string // --job_name, by which the read finds its checkpoints
	ran chan error
}

// startOnFlink submits a pipeline reading ps with splits splits to f and
// counting into run, and waits until Flink runs it.
func (r *satRig) startOnFlink(ctx context.Context, f *flink.Flink, ps []pair, splits int, run string) (*flinkRun, error) {
	fr := &flinkRun{f: f, job: fmt.Sprintf("pubsubio-bench-%d", time.Now().UnixNano()), ran: make(chan error, 1)}
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions:       subsOf(ps),
		Splits:              splits,
		Connection:          r.local.conn,
		Commit:              pubsubio.CommitFlinkCheckpoint,
		Flink:               pubsubio.FlinkCheckpoints{REST: f.REST.Addr, Job: fr.job},
		MaxRecordsPerBundle: *flinkBundle,
	})
	endStage(s, beam.ParDo(s, &countMessagesFn{Run: run}, msgs))
	*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.JobName = f.Endpoint, "LOOPBACK", fr.job
	go func() {
		_, err := beamflink.Execute(ctx, p)
		fr.ran <- err
	}()
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := f.REST.AwaitRunningJob(waitCtx); err != nil {
		return nil, fmt.Errorf("%w\n--- job server log ---\n%s", err, f.Log("jobserver", 4000))
	}
	return fr, nil
}

// stop cancels the job and waits for its submission to end.
func (fr *flinkRun) stop(ctx context.Context) error {
	*jobopts.JobName = ""
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
	case <-fr.ran: // a cancelled job ends Execute with the cancellation
		return nil
	case <-time.After(time.Minute):
		return errors.New("the cancelled Flink job did not end within a minute")
	}
}

// readBacklogOnFlink reads a backlog of c.total() messages on f and returns
// the sample, its rate the server's (deliveryRate), once the server saw
// every message acked.
func (r *satRig) readBacklogOnFlink(ctx context.Context, f *flink.Flink, c readCase) (sample, error) {
	ps, err := r.local.newPairs(ctx, "flinkb", 1)
	if err != nil {
		return sample{}, err
	}
	defer r.local.drop(ctx, ps)
	if err := r.local.backlog(ctx, ps, c.messages, c.size); err != nil {
		return sample{}, err
	}
	run := ps[0].sub.ID
	rc, forget := newRunCount(run, c.total())
	defer forget()
	var fr *flinkRun
	s, err := measured("flink", c.total(), func() (float64, error) {
		var err error
		if fr, err = r.startOnFlink(ctx, f, ps, c.splitsPerSub, run); err != nil {
			return 0, err
		}
		select {
		case <-rc.done:
		case err := <-fr.ran:
			return 0, fmt.Errorf("the Flink job ended before reading everything: %v", err)
		case <-time.After(5 * time.Minute):
			return 0, fmt.Errorf("the Flink job read %d of %d messages in 5 minutes", rc.n.Load(), c.total())
		}
		return rc.rate()
	})
	if fr != nil {
		st, verr := r.verify(ctx, ps, c.total())
		s.rate = st.deliveryRate()
		err = errors.Join(err, verr, fr.stop(ctx))
	}
	return s, err
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
		run := ps[0].sub.ID
		rc, forget := newRunCount(run, n)
		defer forget()
		fr, err := r.startOnFlink(ctx, f, ps, splits, run)
		if err != nil {
			return satStats{}, err
		}
		err = feed(ctx, pub, n, *flinkRate, 1024)
		if err == nil {
			select {
			case <-rc.done:
			case <-time.After(2 * time.Minute):
				err = fmt.Errorf("read %d of %d messages fed", rc.n.Load(), n)
			}
		}
		st, verr := r.verify(ctx, ps, n)
		return st, errors.Join(err, verr, fr.stop(ctx))
	}
	st, verr := r.verify(ctx, ps, n)
	return st, errors.Join(err, verr)
}

// measureFlink reads from the saturation server on Flink's embedded
// cluster at each checkpoint interval and parallelism, beside the
// standalone Prism and the raw client at the same splits: the backlog
// read's rate and worker CPU, and publish-to-ack latency at a steady feed.
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
	// CPU over each whole run: on Flink a read's output leaves in bursts at
	// checkpoints, so the span between the first and the last message
	// counted downstream is not the read's.
	steady = nil
	var b strings.Builder
	var misses []string
	fmt.Fprintf(&b, "\n== flink (embedded cluster; %v; backlog %d msgs of 1 KiB, feed %d msg/s for %d s; one run per point; CPU over each whole run, submission included)\n\n", r.shape, *flinkMessages, *flinkRate, *flinkSeconds)
	b.WriteString("| runner | parallelism (splits) | backlog msg/s (server's deliveries) | worker CPU µs/msg | ack latency p50 / p99 at the feed |\n|---|---|---|---|---|\n")
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
		for _, iv := range intervals {
			name := fmt.Sprintf("Flink, checkpoints every %v", iv)
			row, err := r.flinkPoint(ctx, c, iv)
			if err != nil {
				fmt.Printf("  %s, parallelism %d: %v\n", name, par, err)
				misses = append(misses, fmt.Sprintf("%s, parallelism %d: %v", name, par, err))
				continue
			}
			b.WriteString(row)
			fmt.Print(row)
		}
	}
	return b.String() + writes, misses, nil
}

// flinkWrites writes --flink_write_messages to one topic with the sink on
// Flink's embedded cluster (checkpoints off: a bounded write then ends) at
// each parallelism, beside the sink on the standalone Prism and the raw
// publisher; one run each. It returns their table.
func (r *satRig) flinkWrites(ctx context.Context, pars []int) (string, error) {
	c := writeCase{size: 1024, topics: 1, messages: *flinkWrites}
	// Steady state, as the saturation writes: from the first message's
	// creation to the last Publish call the server received (writeRun).
	steady = &window{}
	defer func() { steady = nil }()
	b := fmt.Sprintf("\n| write 1 KiB, one topic, %d msgs | msg/s | worker CPU µs/msg | msgs per Publish |\n|---|---|---|---|\n", c.messages)
	row := func(name string, e *env, write func(context.Context, *env, writeCase, []pair) (float64, error)) error {
		s, rpcs, err := r.writeRun(ctx, name, c, func(ctx context.Context, ps []pair) (float64, error) { return write(ctx, e, c, ps) })
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		b += fmt.Sprintf("| %s | %.0f | %s | %.1f |\n", name, s.rate, micros(s.cpu), float64(c.messages)/float64(rpcs))
		return nil
	}
	if err := row("raw publisher", r.local, writeRaw); err != nil {
		return b, err
	}
	if err := row("sink, Prism, worker out of process", r.worker, writeWithSink); err != nil {
		return b, err
	}
	for _, par := range pars {
		dir, err := os.MkdirTemp("", "bench-flink")
		if err != nil {
			return b, err
		}
		f, err := flink.Launch(ctx, dir, flink.Options{Parallelism: par})
		if err == nil {
			e := *r.local
			e.flink = f
			err = row(fmt.Sprintf("sink, Flink, parallelism %d", par), &e, writeWithSink)
			err = errors.Join(err, f.Stop())
		}
		os.RemoveAll(dir)
		if err != nil {
			return b, err
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
		var s sample
		if err == nil {
			s, err = measured(k.name, c.total(), func() (float64, error) { return k.read(ctx, ps) })
		}
		if err == nil {
			var st satStats
			st, err = r.verify(ctx, ps, c.total())
			s.rate = st.deliveryRate()
		}
		r.local.drop(ctx, ps)
		if err != nil {
			return b.String(), fmt.Errorf("%s: %w", k.name, err)
		}
		latency := "-"
		if k.name != "raw client" {
			st, err := r.ackLatency(ctx, nil, c.splitsPerSub)
			if err != nil {
				return b.String(), fmt.Errorf("%s ack latency: %w", k.name, err)
			}
			latency = fmt.Sprintf("%v / %v", st.AckLatencyP50.Round(time.Millisecond), st.AckLatencyP99.Round(time.Millisecond))
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s |\n", k.name, c.splitsPerSub, s.rate, micros(s.cpu), latency)
	}
	fmt.Print(b.String())
	return b.String(), nil
}

// flinkPoint starts an embedded Flink checkpointing every interval at c's
// parallelism, measures a backlog read and the ack latency on it, and
// stops it.
func (r *satRig) flinkPoint(ctx context.Context, c readCase, interval time.Duration) (string, error) {
	dir, err := os.MkdirTemp("", "bench-flink")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	f, err := flink.Launch(ctx, dir, flink.Options{CheckpointInterval: interval, Parallelism: c.splitsPerSub})
	if err != nil {
		return "", err
	}
	defer f.Stop()
	s, err := r.readBacklogOnFlink(ctx, f, c)
	if err != nil {
		return "", err
	}
	st, err := r.ackLatency(ctx, f, c.splitsPerSub)
	if err != nil {
		return "", err
	}
	title := fmt.Sprintf("Publish to ack on Flink at %d msg/s (%s server)", *flinkRate, *satShapeName)
	figures.add("flink-ack-latency", title, "checkpoint interval (s)", "s", fmt.Sprintf("p99, parallelism %d", c.splitsPerSub), interval.Seconds(), st.AckLatencyP99.Seconds())
	figures.add("flink-ack-latency", title, "checkpoint interval (s)", "s", fmt.Sprintf("p50, parallelism %d", c.splitsPerSub), interval.Seconds(), st.AckLatencyP50.Seconds())
	figures.add("flink-backlog-rate", fmt.Sprintf("Backlog read on Flink, 1 KiB (%s server)", *satShapeName), "checkpoint interval (s)", "msg/s", fmt.Sprintf("parallelism %d", c.splitsPerSub), interval.Seconds(), s.rate)
	return fmt.Sprintf("| Flink, checkpoints every %v | %d | %.0f | %s | %v / %v |\n", interval, c.splitsPerSub, s.rate, micros(s.cpu),
		st.AckLatencyP50.Round(time.Millisecond), st.AckLatencyP99.Round(time.Millisecond)), nil
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
