package sink

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
)

// repairAll repairs every destination with parked messages, least recently
// used last.
func (w *writer) repairAll(ctx context.Context) error {
	for e := w.lru.Front(); e != nil; e = e.Next() {
		if d := e.Value.(*dest); len(d.parked) > 0 {
			if err := w.repair(ctx, d); err != nil {
				return err
			}
		}
	}
	return w.failure
}

// repair republishes d's parked messages until none is left, the bundle
// fails, or RecoveryMaxAttempts republishes did not drain them.
//
// Each attempt first waits until nothing of d is in flight. With ordering,
// the client pauses a key after a failure and fails (cancels) every later
// batch of it, from its own goroutines and in no promised order; waiting
// for all of them collects the whole cascade before anything is resumed, so
// a resumed key cannot let a later message overtake an earlier one. Then,
// if a parked message saw NOT_FOUND, the topic is created (once per
// repair); the parked keys are resumed; and the messages are republished
// in publish order, the per-writer sequence, never the order their
// failures were observed in. A message rejected in a batch is republished
// alone, and the key of one the failure policy then routed is resumed
// before the key's next message, so a run of bad messages drains in one
// attempt. Republishing does not recheck the caps: the parked messages
// were admitted once, and pausing between them could reorder a key.
func (w *writer) repair(ctx context.Context, d *dest) error {
	created := false
	routedBefore := w.stats.sendErrors.Load()
	for attempt := 1; ; attempt++ {
		d.flush()
		if err := w.waitFor(ctx, "draining "+d.topic.String()+" before republishing", func() bool { return d.inflight == 0 }); err != nil {
			return err
		}
		if len(d.parked) == 0 {
			break
		}
		if attempt > w.cfg.RecoveryMaxAttempts {
			return w.fail(w.exhausted(d, created, w.stats.sendErrors.Load()-routedBefore))
		}
		if attempt > 1 {
			if err := w.backoff(ctx, attempt-1); err != nil {
				return err
			}
		}
		if d.notFound {
			if !created {
				if err := w.createTopic(ctx, d); err != nil {
					return err
				}
				created = true
			}
			d.notFound = false
		}
		batch := d.parked
		d.parked = nil
		slices.SortFunc(batch, func(a, b *outbound) int { return cmp.Compare(a.seq, b.seq) })
		// Resume the batch's keys, and any a routed message paused.
		for _, o := range batch {
			if k := o.msg.OrderingKey; k != "" {
				d.paused[k] = true
			}
		}
		w.resumePaused(d)
		for _, o := range batch {
			if k := o.msg.OrderingKey; k != "" && d.paused[k] {
				d.pub.resume(k)
				delete(d.paused, k)
			}
			if !o.isolate {
				w.send(d, o, false)
				continue
			}
			if err := w.publishAlone(ctx, d, o); err != nil {
				return err
			}
		}
	}
	w.resumePaused(d)
	return w.failure
}

// publishAlone republishes o in a request of its own and waits for its
// verdict. Nothing else of d may be in flight, or the client could batch o
// with it; the next message waits for the verdict, so a routed keyed
// message's key is resumed before that key's next message.
func (w *writer) publishAlone(ctx context.Context, d *dest, o *outbound) error {
	what := "waiting for the verdict on a message republished alone to " + d.topic.String()
	if d.inflight > 0 {
		d.flush()
		if err := w.waitFor(ctx, what, func() bool { return d.inflight == 0 }); err != nil {
			return err
		}
	}
	w.send(d, o, true)
	d.flush()
	return w.waitFor(ctx, what, func() bool { return d.inflight == 0 })
}

// createTopic creates d's topic with the TopicCreate options. ALREADY_EXISTS
// is success: writers racing to create the same topic need no coordination.
// topics_created counts repairs that created (or found created) a topic, not
// distinct topics.
func (w *writer) createTopic(ctx context.Context, d *dest) error {
	err := w.be.createTopic(ctx, w.cfg.TopicCreate.topicProto(d.topic))
	code, _ := grpccode.Of(err)
	if err != nil && code != codes.AlreadyExists {
		return w.fail(fmt.Errorf("pubsubio.Write: %s does not exist and creating it failed: create it, grant the job's account roles/pubsub.editor on project %s, or set CreateDisposition %s: %w",
			d.topic, d.topic.Project, CreateNever, err))
	}
	w.stats.topicsCreated.Add(1)
	if err == nil {
		w.infof(ctx, "pubsubio.Write: created topic %s (with %s) after a publish found it missing", d.topic, w.cfg.TopicCreate.describe())
	}
	return nil
}

// backoff waits before republish attempt n+1: RecoveryInitialBackoff
// doubling per attempt up to RecoveryMaxBackoff, with +-RecoveryJitter.
// Writers that parked messages for the same missing topic all resume
// against the same new topic; unjittered they would retry in lockstep.
func (w *writer) backoff(ctx context.Context, n int) error {
	t := time.NewTimer(w.backoffDelay(n))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return w.fail(fmt.Errorf("pubsubio.Write: waiting to republish to a repaired topic: %w", ctx.Err()))
	}
}

// backoffDelay is the wait before republish attempt n+1. It doubles by
// steps rather than by shifting, which overflows (and turns the wait
// negative: no backoff at all) from the 31st attempt with an initial
// backoff of 9 s or more.
func (w *writer) backoffDelay(n int) time.Duration {
	wait, max := w.cfg.RecoveryInitialBackoff, w.cfg.RecoveryMaxBackoff
	for i := 1; i < n && wait < max; i++ {
		if wait > max/2 {
			wait = max
		} else {
			wait *= 2
		}
	}
	return time.Duration(float64(wait) * (1 + w.cfg.RecoveryJitter*(2*w.rand()-1)))
}

// exhausted says why a repair gave up.
func (w *writer) exhausted(d *dest, created bool, routed int64) error {
	what := "kept failing"
	if created {
		what = "kept failing after the topic was created"
	}
	return fmt.Errorf("pubsubio.Write: %d parked messages to %s %s within RecoveryMaxAttempts %d (%d routed by the failure policy meanwhile); last failure: %v",
		len(d.parked), d.topic, what, w.cfg.RecoveryMaxAttempts, routed, d.lastErr)
}
