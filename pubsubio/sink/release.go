package sink

import (
	"context"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// release removes ds from the cache and stops their publishers, bounded by
// ShutdownTimeout, returning the topics whose publisher did not stop in
// time.
//
// The release is two-phase: every publisher is asked to stop before any is
// waited on, and then all are waited on against one deadline, so releasing
// many topics (dynamic destinations at Teardown) costs one ShutdownTimeout,
// not one per topic. The bound is real, not a formality: Publisher.Stop
// sends what is batched and waits for every batch, and a batch being
// retried through an outage holds it until the publish Timeout, with
// nothing to interrupt it. An abandoned stop keeps running in the
// background; it is logged with its topic and counted
// (publisher_shutdowns_abandoned).
func (w *writer) release(ctx context.Context, ds []*dest, why string) []model.Topic {
	if len(ds) == 0 {
		return nil
	}
	stopping := make([]chan struct{}, len(ds))
	for i, d := range ds {
		w.forget(d)
		done := make(chan struct{})
		stopping[i] = done
		go func() {
			d.flushes.Wait() // the client's Flush and Stop must not overlap
			d.pub.stop()
			close(done)
		}()
	}
	deadline := time.NewTimer(w.cfg.ShutdownTimeout)
	defer deadline.Stop()
	expired := false
	var abandoned []model.Topic
	for i, done := range stopping {
		if !expired {
			select {
			case <-done:
				continue
			case <-deadline.C:
				expired = true
			}
		}
		select {
		case <-done:
		default:
			abandoned = append(abandoned, ds[i].topic)
		}
	}
	for _, t := range abandoned {
		shutdownsAbandoned.Add(1)
		w.warnf(ctx, "pubsubio: the publisher of %s did not stop within ShutdownTimeout %v (%s); abandoning it: its goroutines and anything it still retries stay until the client gives up (Publisher.Timeout %v)",
			t, w.cfg.ShutdownTimeout, why, w.cfg.Publisher.Timeout)
	}
	return abandoned
}
