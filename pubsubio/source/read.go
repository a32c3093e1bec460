package source

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

// Read reads cfg.Subscriptions and cfg.Topics and returns a PCollection<model.Message>
// whose event time is each message's publish time (or TimestampAttribute).
// It rejects DecodePolicy DecodeDeadLetter and LatePolicy LateDeadLetter,
// whose dead letters it has no output for: use ReadWithDeadLetters. It panics on an invalid
// configuration; TryRead returns the error.
func Read(s beam.Scope, cfg Config) beam.PCollection {
	col, err := TryRead(s, cfg)
	if err != nil {
		panic(err)
	}
	return col
}

// TryRead is Read returning the construction error instead of panicking.
func TryRead(s beam.Scope, cfg Config) (beam.PCollection, error) {
	if cfg.DecodePolicy == model.DecodeDeadLetter {
		return beam.PCollection{}, construct.Invalid("pubsubio.Read", fmt.Errorf("DecodePolicy %s emits dead letters that Read has no output for; use ReadWithDeadLetters, or another DecodePolicy", model.DecodeDeadLetter))
	}
	if cfg.LatePolicy == LateDeadLetter {
		return beam.PCollection{}, construct.Invalid("pubsubio.Read", fmt.Errorf("LatePolicy %s emits dead letters that Read has no output for; use ReadWithDeadLetters, or LatePolicy %s", LateDeadLetter, LateEmit))
	}
	msgs, _, err := read(s, cfg)
	return msgs, err
}

// ReadWithDeadLetters is Read that also returns the read's dead letters: a
// PCollection<dlq.FailedMessage> of the messages that failed to decode under
// DecodePolicy DecodeDeadLetter (stage decode, Subscription and Attempts
// set) and of those that arrived late under LatePolicy LateDeadLetter
// (stage late), for instance to pass to dlq.Write. Under the other
// policies it stays empty. It panics on an invalid configuration;
// TryReadWithDeadLetters returns the error.
func ReadWithDeadLetters(s beam.Scope, cfg Config) (msgs, deadLetters beam.PCollection) {
	msgs, deadLetters, err := TryReadWithDeadLetters(s, cfg)
	if err != nil {
		panic(err)
	}
	return msgs, deadLetters
}

// TryReadWithDeadLetters is ReadWithDeadLetters returning the construction
// error instead of panicking.
func TryReadWithDeadLetters(s beam.Scope, cfg Config) (msgs, deadLetters beam.PCollection, err error) {
	return read(s, cfg)
}

// read builds the read and returns its messages and its dead letters.
func read(s beam.Scope, cfg Config) (beam.PCollection, beam.PCollection, error) {
	fail := func(err error) (beam.PCollection, beam.PCollection, error) {
		return beam.PCollection{}, beam.PCollection{}, err
	}
	p, err := newReadPlan(cfg)
	if err != nil {
		return fail(err)
	}
	if err := rejectDirectRunner(); err != nil {
		return fail(err)
	}
	d := deploymentFlags()
	if p.Cfg, err = p.Cfg.withCommit(d); err != nil {
		return fail(err)
	}
	if p.Cfg.Commit == CommitFlinkCheckpoint && d.onFlink() {
		if err := prepareFlinkJob(&p.Cfg); err != nil {
			return fail(err)
		}
	}
	p.Cfg = p.Cfg.withCommitDefaults(cfg)
	for _, w := range p.Cfg.warnings(time.Now()) {
		log.Warn(context.Background(), w)
	}
	s = s.Scope("pubsubio.Read")
	if err := prepare.Claim(s, p.Cfg.Subscriptions, p.Owned); err != nil {
		return fail(err)
	}

	// The prepare step (describe, check, create, seek) runs once per job and
	// emits one element per split only once it succeeded; the reshuffle
	// spreads the splits over workers and commits them, so no split reads
	// before the prepare step is done.
	prepared, err := beam.TryParDo(s, &prepareFn{Plan: p}, beam.Impulse(s))
	if err != nil {
		return fail(fmt.Errorf("pubsubio.Read: %w", err))
	}
	elems := beam.Reshuffle(s, prepared[0])

	rfn := readFn{ReadID: newProcessID(), SplitCount: len(p.Splits), Cfg: p.Cfg}
	var fn any = &rfn
	if useFinalization(p.Cfg.Finalization, sdkVersion) {
		fn = &finalizingReadFn{readFn: rfn}
	}
	out, err := beam.TryParDo(s, fn, elems)
	if err != nil {
		return fail(fmt.Errorf("pubsubio.Read: %w", err))
	}
	if p.Owned.Generated {
		deleteWhenDone(s, p, out[0])
	}
	if p.Cfg.Commit == CommitFlinkCheckpoint && p.Cfg.bounded() {
		drainWhenDone(s, p.Cfg, out[0])
	}
	return out[0], out[1], nil
}

// runnerFlag is the runner the pipeline is built for (Beam's --runner).
func runnerFlag() string {
	if f := flag.Lookup("runner"); f != nil {
		return f.Value.String()
	}
	return ""
}

// rejectDirectRunner refuses Beam Go's deprecated direct runner: it runs
// splittable DoFns through a fallback that ignores process continuations
// and panics on watermark estimators, so the read would silently misbehave.
func rejectDirectRunner() error {
	if runnerFlag() != "direct" {
		return nil
	}
	return construct.Invalid("pubsubio.Read", errors.New("the direct runner cannot run this read (it ignores process continuations): run with --runner=prism, Beam Go's local runner, or another portable runner"))
}

// The flags that set, for every read of a pipeline, what depends on the
// deployment rather than the read: where Flink's checkpoints are seen.
var (
	commitFlag = flag.String("pubsubio_commit", "",
		"when pubsubio's reads ack, for those whose Commit is CommitAuto: AUTO, RESUME or FLINK_CHECKPOINT (see source.CommitMode)")
	flinkRESTFlag = flag.String("pubsubio_flink_rest", "",
		"host:port of the Flink JobManager's REST API, for pubsubio's reads whose Flink.REST is empty (CommitFlinkCheckpoint)")
)

// deployment is what the flags say of where the pipeline runs.
type deployment struct {
	runner, jobName string     // --runner, --job_name
	commit          CommitMode // --pubsubio_commit
	flinkREST       string     // --pubsubio_flink_rest
}

// onFlink reports whether the pipeline is submitted to Flink.
func (d deployment) onFlink() bool { return strings.EqualFold(d.runner, "flink") }

func deploymentFlags() deployment {
	return deployment{runner: runnerFlag(), jobName: *jobopts.JobName, commit: CommitMode(*commitFlag), flinkREST: *flinkRESTFlag}
}

// withCommitDefaults sets the defaults that depend on the resolved commit,
// for the fields zero in set (the read's configuration as given): under
// CommitFlinkCheckpoint the larger budget; each stream's window, again
// from that budget (flowControlFromBudget); and, under
// CommitFlinkCheckpoint, a bundle cap of what a split's streams may hold,
// since a read's bundle on Flink ends only at a checkpoint and the cap
// would otherwise bound a split's rate to DefaultMaxRecordsPerBundle per
// checkpoint interval (BENCHMARKS.md, Flink).
func (cfg Config) withCommitDefaults(set Config) Config {
	if cfg.Commit == CommitFlinkCheckpoint {
		if set.BufferMaxMessages == 0 {
			cfg.BufferMaxMessages = DefaultFlinkBufferMaxMessages
		}
		if set.BufferMaxBytes == 0 {
			cfg.BufferMaxBytes = DefaultFlinkBufferMaxBytes
		}
	}
	cfg.MaxOutstandingMessages, cfg.MaxOutstandingBytes = set.MaxOutstandingMessages, set.MaxOutstandingBytes
	cfg.flowControlFromBudget()
	if set.MaxRecordsPerBundle == 0 && cfg.Commit == CommitFlinkCheckpoint && cfg.MaxOutstandingMessages > 0 {
		cfg.MaxRecordsPerBundle = max(DefaultMaxRecordsPerBundle, cfg.MaxOutstandingMessages*cfg.ParallelPullCount)
	}
	return cfg
}

// withCommit resolves CommitAuto, first by d.commit, then for d.runner,
// and checks what CommitFlinkCheckpoint needs, taking the REST address and
// the job's name from d when the read does not set them.
func (cfg Config) withCommit(d deployment) (Config, error) {
	if cfg.Commit == CommitAuto && d.commit != "" {
		switch d.commit {
		case CommitAuto, CommitResume, CommitFlinkCheckpoint:
			cfg.Commit = d.commit
		default:
			return cfg, construct.Invalid("pubsubio.Read", fmt.Errorf("--pubsubio_commit %q is unknown; use %q, %q or %q", text.Truncate(string(d.commit), text.MaxQuoted), CommitAuto, CommitResume, CommitFlinkCheckpoint))
		}
	}
	if cfg.Commit == CommitAuto {
		cfg.Commit = CommitResume
		if d.onFlink() {
			cfg.Commit = CommitFlinkCheckpoint
		}
	}
	if cfg.Commit != CommitFlinkCheckpoint {
		return cfg, nil
	}
	restOption := "Flink.REST"
	if cfg.Flink.REST == "" {
		cfg.Flink.REST, restOption = d.flinkREST, "--pubsubio_flink_rest"
	}
	jobOption := "Flink.Job"
	if cfg.Flink.Job == "" {
		cfg.Flink.Job, jobOption = d.jobName, "--job_name"
	}
	var errs []error
	if cfg.Flink.REST == "" {
		errs = append(errs, fmt.Errorf("with Commit %s (the default with --runner=flink) the read acks only what a completed Flink checkpoint covers, and needs Flink.REST (or --pubsubio_flink_rest), the JobManager's REST address; "+
			"set it, or set Commit %s (--pubsubio_commit=%s) to ack at the split's next bundle, which loses what a shuffle behind the read holds when the job fails (docs/runners.md, Running on Flink)", CommitFlinkCheckpoint, CommitResume, CommitResume))
	} else if err := connection.CheckHostPort(restOption, cfg.Flink.REST, "jobmanager:8081"); err != nil {
		errs = append(errs, err)
	}
	if trimmed := strings.TrimSpace(cfg.Flink.Job); trimmed != cfg.Flink.Job {
		why := "has spaces around it"
		if trimmed == "" {
			why = "is blank"
		}
		errs = append(errs, fmt.Errorf("%s %q %s; the read finds the job's checkpoints by the name Flink gives it (the job name followed by \"-\"): set the name the job is submitted with", jobOption, text.Truncate(cfg.Flink.Job, text.MaxQuoted), why))
	}
	if cfg.Flink.Job == "" && !d.onFlink() { // on Flink, prepareFlinkJob names the job
		errs = append(errs, fmt.Errorf("with Commit %s the read finds the job's checkpoints by its name: set --job_name, or Flink.Job", CommitFlinkCheckpoint))
	}
	return cfg, construct.Invalid("pubsubio.Read", errs...)
}
