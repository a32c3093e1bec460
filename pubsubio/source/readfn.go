package source

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/backlog"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/commit"
)

type emitFn = func(beam.EventTime, model.Message)

// deadFn emits the read's dead letters, at the event time the message
// would have had (decoded.eventTime).
type deadFn = func(beam.EventTime, dlq.FailedMessage)

func init() {
	register.DoFn6x2[context.Context, *watermarkEstimator, *sdf.LockRTracker, Split, emitFn, deadFn, sdf.ProcessContinuation, error](&readFn{})
	register.DoFn7x2[context.Context, *watermarkEstimator, beam.BundleFinalization, *sdf.LockRTracker, Split, emitFn, deadFn, sdf.ProcessContinuation, error](&finalizingReadFn{})
	register.Emitter2[beam.EventTime, model.Message]()
	register.Emitter2[beam.EventTime, dlq.FailedMessage]()
}

// readFn is the read SDF: one element per split, one bundle after another
// per split, each acking what the previous one emitted. It does not declare
// bundle finalization; finalizingReadFn does.
type readFn struct {
	// ReadID keys this read's splits in the process-wide registry.
	ReadID string
	// SplitCount is the number of splits, for bounded reads' shares.
	SplitCount int
	Cfg        Config

	rs *readState
}

func (fn *readFn) Setup() {
	fn.rs = readers.attach(fn.ReadID, fn.Cfg)
}

// Teardown releases the read's splits when the process's last instance
// goes: what they hold goes back to Pub/Sub at once.
func (fn *readFn) Teardown() {
	readers.detach(fn.ReadID)
}

func (fn *readFn) CreateInitialRestriction(Split) Restriction { return Restriction{} }

func (fn *readFn) SplitRestriction(_ Split, rest Restriction) []Restriction {
	return []Restriction{rest}
}

// RestrictionSize is the split's share of its subscription's backlog
// bytes (backlogprogress.go).
func (fn *readFn) RestrictionSize(split Split, rest Restriction) float64 {
	return fn.backlogSize(split, rest)
}

func (fn *readFn) CreateTracker(rest Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(newTracker(rest, processID))
}

// TruncateRestriction runs when a streaming pipeline drains: the split
// still acks what its last committed bundle emitted, then ends.
func (fn *readFn) TruncateRestriction(rt *sdf.LockRTracker, _ Split) Restriction {
	rest := rt.GetRestriction().(Restriction)
	rest.Final = true
	return rest
}

func (fn *readFn) InitialWatermarkEstimatorState(et beam.EventTime, _ Restriction, _ Split) int64 {
	return int64(et)
}

func (fn *readFn) CreateWatermarkEstimator(state int64) *watermarkEstimator {
	return &watermarkEstimator{state: state}
}

func (fn *readFn) WatermarkEstimatorState(e *watermarkEstimator) int64 { return e.state }

func (fn *readFn) ProcessElement(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, split Split, emit emitFn, dead deadFn) (sdf.ProcessContinuation, error) {
	return fn.runBundle(ctx, we, rt, split, emit, dead, nil)
}

// finalizingReadFn is readFn plus bundle finalization, used where the SDK
// delivers it (useFinalization): committed messages are acked as soon as
// the runner confirms the commit, instead of at the split's next bundle.
type finalizingReadFn struct {
	readFn
	watch *commit.Watch
}

func (fn *finalizingReadFn) Setup() {
	fn.readFn.Setup()
	fn.watch = commit.NewWatch()
}

// StartBundle marks bundle boundaries for the lost-callback check. It
// declares the emitters because Beam requires the bundle methods of a DoFn
// with emitters to declare the same ones.
func (fn *finalizingReadFn) StartBundle(context.Context, emitFn, deadFn) {
	fn.watch.StartBundle()
}

func (fn *finalizingReadFn) ProcessElement(ctx context.Context, we *watermarkEstimator, bf beam.BundleFinalization, rt *sdf.LockRTracker, split Split, emit emitFn, dead deadFn) (sdf.ProcessContinuation, error) {
	return fn.runBundle(ctx, we, rt, split, emit, dead, func(r *splitReader, seq int64, ids []ackID) {
		fn.watch.Register(ctx, bf, time.Now(), func() { r.finalized(seq, ids) })
	})
}

// runBundle is one bundle of one split: ack what the previous bundle
// emitted, emit what is buffered, and checkpoint with this bundle's ack
// IDs. finalize, when set, registers the early ack of this bundle's
// messages.
func (fn *readFn) runBundle(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, split Split, emit emitFn, dead deadFn, finalize func(r *splitReader, seq int64, ids []ackID)) (sdf.ProcessContinuation, error) {
	rest := rt.GetRestriction().(Restriction)
	key := splitKey{read: fn.ReadID, index: split.Index}
	r, rs := readers.reader(key, split, fn.Cfg)
	defer rs.flush(ctx)
	defer r.reportBacklog(ctx)
	fn.trackBacklog(rt, r, split)

	share := splitShare(fn.Cfg.MaxMessages, split.Index, fn.SplitCount, len(fn.Cfg.Subscriptions))
	limit := fn.Cfg.MaxRecordsPerBundle
	if share >= 0 {
		limit = int(min(int64(limit), max(share-rest.Emitted, 0)))
	}
	batch, err := r.beginBundle(ctx, rest, limit)
	// The answers to exactly-once acks (exactlyonce.go) arrive while the
	// bundle emits.
	defer r.confirmAcks(ctx)
	if rest.Final && err == nil && r.waitingForCommit() {
		// What the split emitted last waits for a checkpoint to cover it:
		// the split ends once it is acked, not before.
		rt.Mu.Lock()
		rt.Rt.(*tracker).finishAfterThisBundle()
		rt.Mu.Unlock()
		return sdf.ResumeProcessingIn(fn.Cfg.PollDelay), nil
	}
	if rest.Final {
		r.confirmAcks(ctx) // before the release stops the client sending them
		readers.releaseSplit(key, r, nackedRelease)
		we.finish()
		rt.TryClaim(finishClaim{})
		return sdf.StopProcessing(), err
	}
	if err != nil {
		return sdf.StopProcessing(), err
	}
	// A bundle that never returns (a stage fused after the read blocks)
	// keeps its split in use, and what the split holds leased, until
	// MaxExtension. The worker's context ends when the runner stops the
	// worker, as it does once a job failed or was cancelled: the split is
	// released then, and what it held goes back to Pub/Sub.
	stop := context.AfterFunc(ctx, func() {
		log.Infof(context.Background(), "pubsubio.Read: releasing split %d of %s: its worker stopped during a bundle; what it held goes back to Pub/Sub", split.Index, split.Subscription)
		readers.releaseSplit(key, r, nackedRelease)
	})
	defer stop()
	out, err := fn.emitBatch(r, rt, rest.Seq, we.CurrentWatermark(), batch, emit, dead)
	if err != nil {
		return sdf.StopProcessing(), err
	}
	if finalize != nil {
		finalize(r, rest.Seq, out.claimed)
	}

	state := r.endBundle(out.nacks, fn.Cfg.watermarkPolicy())
	we.advance(readers.watermark(fn.ReadID))

	reachedShare := share >= 0 && rest.Emitted+int64(len(batch)) >= share
	idle := fn.Cfg.IdleTimeout > 0 && state.buffered == 0 && state.at.Sub(state.listeningSince) >= fn.Cfg.IdleTimeout &&
		!r.ledger.givenBack.awaits(split.Subscription, state.at.Add(-fn.Cfg.IdleTimeout)) && !readers.siblingHolds(key, r)
	if idle && !reachedShare {
		// The client retries a broken stream without a word, so a deleted
		// subscription or an unreachable Pub/Sub also looks idle: the read
		// ends only once its subscription answers.
		if err := r.confirmSubscription(ctx); err != nil {
			r.abandonBundle(rest.Seq, nil)
			return sdf.StopProcessing(), err
		}
	}
	if reachedShare || idle {
		rt.Mu.Lock()
		rt.Rt.(*tracker).finishAfterThisBundle()
		rt.Mu.Unlock()
		return sdf.ResumeProcessingIn(0), nil
	}
	if len(batch) > 0 || state.buffered > 0 || state.withheld > 0 {
		// Resume at once so this bundle's acks go out and free the
		// client's flow control, and what is withheld goes back.
		return sdf.ResumeProcessingIn(0), nil
	}
	return sdf.ResumeProcessingIn(fn.Cfg.PollDelay), nil
}

// emitted is what emitBatch did with a batch.
type emitted struct {
	claimed []ackID     // what this bundle acks once committed
	nacks   []*delivery // not decodable under DecodeNack: nacked at the end of the bundle
}

// emitBatch claims and emits batch. A message that did not decode follows
// DecodePolicy, and one behind watermark, what the split last reported,
// LatePolicy. Under DecodeFail it fails the bundle; so does a downstream
// failure (a panic out of emit). Either way the runner discards this
// bundle's output: the message that failed goes back to Pub/Sub at once,
// and the rest of what the bundle emitted stays for the retry (requeue.go).
func (fn *readFn) emitBatch(r *splitReader, rt *sdf.LockRTracker, seq int64, watermark time.Time, batch []*delivery, emit emitFn, dead deadFn) (out emitted, err error) {
	var current *delivery // the one being emitted: a panic is its failure
	defer func() {
		if p := recover(); p != nil {
			r.abandonBundle(seq, current)
			panic(p)
		}
	}()
	st := r.stats
	for _, d := range batch {
		current = d
		if d.err != nil {
			st.add(decodeFailures, 1)
			switch fn.Cfg.DecodePolicy {
			case model.DecodeNack:
				// Not claimed: the subscription's dead-letter policy takes
				// it from here, and an ack after the nack must not undo that.
				out.nacks = append(out.nacks, d)
				continue
			case model.DecodeDrop, model.DecodeDeadLetter:
				// Claimed, so acked with the bundle; emitted below only as a
				// dead letter.
			default:
				r.abandonBundle(seq, d)
				return emitted{}, fmt.Errorf("pubsubio.Read: message %s from %s cannot be decoded, so the bundle fails and the message is redelivered: fix the publisher, or set DecodePolicy %s, %s or %s: %w",
					d.msg.ID, d.msg.Subscription, model.DecodeDrop, model.DecodeNack, model.DecodeDeadLetter, d.err)
			}
		}
		if !rt.TryClaim(d) {
			r.abandonBundle(seq, nil)
			return emitted{}, fmt.Errorf("pubsubio.Read: split %d of %s could not claim a message: %w", r.split.Index, r.split.Subscription, rt.GetError())
		}
		out.claimed = append(out.claimed, d.ackID)
		if d.err != nil {
			if fn.Cfg.DecodePolicy == model.DecodeDeadLetter {
				dead(mtime.FromTime(d.eventTime), fn.deadLetter(r, dlq.StageDecode, d, d.err))
			}
			continue
		}
		if d.eventTime.Before(watermark) {
			st.add(lateMessages, 1)
			if fn.Cfg.LatePolicy == LateDeadLetter {
				// At the watermark, so that it is not late on the dead-letter
				// output as well.
				dead(mtime.FromTime(watermark), fn.deadLetter(r, dlq.StageLate, d, lateError(d.eventTime, watermark)))
				continue
			}
		}
		emit(mtime.FromTime(d.eventTime), d.msg)
		st.add(messagesEmitted, 1)
	}
	return out, nil
}

// deadLetter is d's dead letter for failing at stage with err.
func (fn *readFn) deadLetter(r *splitReader, stage dlq.FailureStage, d *delivery, err error) dlq.FailedMessage {
	f := dlq.New(stage, d.msg, err, d.msg.DeliveryAttempt, r.now())
	f.Subscription = d.msg.Subscription
	return f
}

// lateError says why a message is late.
func lateError(eventTime, watermark time.Time) error {
	return fmt.Errorf("event time %s is behind the watermark %s the read had already reported: a window downstream may have fired without it",
		eventTime.UTC().Format(time.RFC3339Nano), watermark.UTC().Format(time.RFC3339Nano))
}

// remainingWork is split's share of the backlog bytes in sample (ok false:
// none), at least one unit: what the split reports while it runs.
func (fn *readFn) remainingWork(split Split, sample backlog.Sample, ok bool) float64 {
	if !ok || !sample.Bytes.Known() {
		return 1
	}
	share := float64(sample.Bytes.Value) / float64(siblingsOf(split.Index, fn.SplitCount, len(fn.Cfg.Subscriptions)))
	return max(share, 1)
}

// backlogSize is RestrictionSize: the split's backlog share for a
// restriction that reads on, from the process's latest sample; one unit
// for the final, ack-only one.
func (fn *readFn) backlogSize(split Split, rest Restriction) float64 {
	if rest.Final || !fn.Cfg.sampling() {
		return 1
	}
	sample, ok := sampleOf(fn.Cfg.Connection, split.Subscription)
	return fn.remainingWork(split, sample, ok)
}

// trackBacklog lets the bundle's tracker report r's backlog share as its
// remaining work.
func (fn *readFn) trackBacklog(rt *sdf.LockRTracker, r *splitReader, split Split) {
	if r.backlog == nil {
		return
	}
	rt.Mu.Lock()
	defer rt.Mu.Unlock()
	rt.Rt.(*tracker).remaining = func() float64 {
		sample, ok := r.backlog.latest()
		return fn.remainingWork(split, sample, ok)
	}
}
