package source

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
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
	if cfg.DecodePolicy == DecodeDeadLetter {
		return beam.PCollection{}, construct.Invalid("pubsubio.Read", fmt.Errorf("DecodePolicy %s emits dead letters that Read has no output for; use ReadWithDeadLetters, or another DecodePolicy", DecodeDeadLetter))
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
	cfg, err := cfg.withDefaults()
	if err != nil {
		return fail(err)
	}
	if err := rejectDirectRunner(); err != nil {
		return fail(err)
	}
	for _, w := range cfg.warnings(time.Now()) {
		log.Warn(context.Background(), w)
	}
	s = s.Scope("pubsubio.Read")
	if err := claimSubscriptions(s, cfg); err != nil {
		return fail(err)
	}
	plan := planSplits(cfg.Subscriptions, cfg.Ordering, cfg.Splits)
	cfg.risks = cfg.attemptRisks()

	// The prepare step (describe, check, create, seek) runs once per job and
	// emits one element per split only once it succeeded; the reshuffle
	// spreads the splits over workers and commits them, so no split reads
	// before the prepare step is done.
	prepared, err := beam.TryParDo(s, &prepareFn{Cfg: cfg, Plan: plan, Owned: cfg.owned, Risks: cfg.risks}, beam.Impulse(s))
	if err != nil {
		return fail(fmt.Errorf("pubsubio.Read: %w", err))
	}
	elems := beam.Reshuffle(s, prepared[0])

	rfn := readFn{ReadID: newProcessID(), SplitCount: len(plan), Cfg: cfg}
	var fn any = &rfn
	if useFinalization(cfg.Finalization, sdkVersion) {
		fn = &finalizingReadFn{readFn: rfn}
	}
	out, err := beam.TryParDo(s, fn, elems)
	if err != nil {
		return fail(fmt.Errorf("pubsubio.Read: %w", err))
	}
	if cfg.owned.Generated {
		deleteWhenDone(s, cfg, out[0])
	}
	return out[0], out[1], nil
}

// rejectDirectRunner refuses Beam Go's deprecated direct runner: it runs
// splittable DoFns through a fallback that ignores process continuations
// and panics on watermark estimators, so the read would silently misbehave.
func rejectDirectRunner() error {
	f := flag.Lookup("runner")
	if f == nil || f.Value.String() != "direct" {
		return nil
	}
	return construct.Invalid("pubsubio.Read", errors.New("the direct runner cannot run this read (it ignores process continuations): run with --runner=prism, Beam Go's local runner, or another portable runner"))
}
