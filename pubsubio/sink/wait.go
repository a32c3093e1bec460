package sink

import (
	"context"
	"fmt"
	"time"
)

// waitFor classifies verdicts as they arrive until done() holds, the
// bundle has failed, or Pub/Sub has confirmed nothing for
// PublishProgressTimeout; what names the wait in errors and logs.
//
// The budget bounds a stall, not a slow topic: it restarts at every
// verdict, so a publisher that keeps answering never spends it. Nothing
// else ends a wait on a topic whose publishes hang, and the counters do not
// show one (a publish that never answers is never a failure), so once a
// tenth of the budget passes without a verdict a warning names the wait and
// what is outstanding, at most once per tenth.
func (w *writer) waitFor(ctx context.Context, what string, done func() bool) error {
	budget := w.cfg.PublishProgressTimeout
	tick := budget / 10
	progress := w.now()
	var warned time.Time
	timer := time.NewTimer(tick)
	defer timer.Stop()
	for {
		if w.poll(ctx) > 0 {
			progress = w.now()
		}
		if w.failure != nil {
			return w.failure
		}
		if done() {
			return nil
		}
		now := w.now()
		idle := now.Sub(progress)
		if idle >= budget {
			return w.fail(fmt.Errorf("pubsubio.Write: Pub/Sub answered none of %d outstanding publishes for PublishProgressTimeout %v while %s: check that the topics are reachable and within quota, or raise PublishProgressTimeout",
				w.inflightMsgs, budget, what))
		}
		if idle >= tick && now.Sub(warned) >= tick {
			w.warnf(ctx, "pubsubio.Write: Pub/Sub has answered none of %d outstanding publishes for %v while %s; the bundle fails after PublishProgressTimeout %v without an answer",
				w.inflightMsgs, idle.Round(time.Millisecond), what, budget)
			warned = now
		}
		timer.Reset(min(tick, budget-idle))
		select {
		case <-w.done.notify:
		case <-timer.C:
		case <-ctx.Done():
			return w.fail(fmt.Errorf("pubsubio.Write: %s with %d publishes outstanding: %w", what, w.inflightMsgs, ctx.Err()))
		}
	}
}

// drainAll flushes every publisher and waits until nothing is in flight,
// nothing is parked and no ordering key is left paused: the end of a
// bundle, and what makes room under MaxActivePublishers when every
// publisher holds something. Repairs can publish again, so it loops until a
// pass finds nothing to repair.
func (w *writer) drainAll(ctx context.Context, what string) error {
	for {
		w.flushAll()
		if err := w.waitFor(ctx, what, func() bool { return w.inflightMsgs == 0 }); err != nil {
			return err
		}
		if !w.anyParked() {
			break
		}
		if err := w.repairAll(ctx); err != nil {
			return err
		}
	}
	// Nothing is in flight, so a key a routed message paused can be resumed
	// without anything overtaking: no bundle returns with a key paused.
	for e := w.lru.Front(); e != nil; e = e.Next() {
		w.resumePaused(e.Value.(*dest))
	}
	return w.failure
}
