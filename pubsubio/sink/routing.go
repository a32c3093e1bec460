package sink

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// complete classifies one verdict on the DoFn's goroutine.
//
// Only two kinds of failure are data-shaped and reach the failure policy: a
// message that breaks Pub/Sub's limits (checked before sending) and one
// Pub/Sub rejected with INVALID_ARGUMENT when it was published alone.
// INVALID_ARGUMENT is the only message-level code: Publish is a batch RPC,
// the client sets the one status on every message of the batch, and the
// other codes describe the service, not a message. Everything else fails
// the bundle, so an outage backpressures and restarts instead of bleeding
// the stream into a dropping policy.
func (w *writer) complete(p *pending) {
	if p.epoch != w.epoch {
		return // from a bundle that failed; its elements are being retried
	}
	d := p.dest
	d.inflight--
	w.inflightMsgs--
	w.inflightBytes -= p.size
	if p.err == nil {
		w.stats.sent(w.cfg.PerDestinationMetrics, d.topic, p)
		w.rejections, w.lastRejection = 0, nil
		return
	}
	err := p.err
	// The client pauses an ordering key after any failure on it and fails
	// every later batch of the key with ErrPublishingPaused until
	// ResumePublish (publisher.go, publishMessageBundle). Such a message has
	// no failure of its own: it is parked and republished once the key is
	// resumed, whatever the disposition, and never counted.
	if errors.As(err, new(pubsub.ErrPublishingPaused)) {
		w.stats.cascaded++
		w.park(d, p, nil)
		return
	}
	code, _ := dlq.CodeOf(err)
	switch {
	case code == codes.NotFound:
		w.countRoot(code, err)
		if w.cfg.CreateDisposition == CreateNever {
			w.setErr(fmt.Errorf("pubsubio.Write: topic %s does not exist (NOT_FOUND) and CreateDisposition is %s; create the topic, fix the destination, or use %s: %w",
				d.topic, CreateNever, CreateIfNeeded, err))
			return
		}
		d.notFound = true
		w.park(d, p, err)
	case code == codes.InvalidArgument && p.solo:
		// A verdict of its own: a confirmed rejection.
		w.countRoot(code, err)
		if p.msg.OrderingKey != "" {
			// The client paused the key; nothing of it is in flight (the
			// message was alone), so the repair resumes it before the key's
			// next message, or the drain does.
			d.paused[p.msg.OrderingKey] = true
		}
		w.route(w.ctx, d.topic, p.msg, dlq.StagePublish, err, p.attempts)
	case code == codes.InvalidArgument:
		// A verdict on the batch, not on this message: republish it alone
		// (repair.go). Not counted: the batch's one status is on every
		// message of it.
		p.isolate = true
		w.park(d, p, err)
	default:
		w.countRoot(code, err)
		w.setErr(fmt.Errorf("pubsubio.Write: publishing to %s failed with %s after the client's retries; the bundle fails (a runner that retries bundles publishes it again, at-least-once; Prism fails the job). %s: %w",
			d.topic, dlq.CodeName(code), w.outageHint(code, d.topic), err))
	}
}

// outageHint says what to check after a publish failed for a reason that
// is not the message's.
func (w *writer) outageHint(code codes.Code, topic model.Topic) string {
	switch code {
	case codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Sprintf("Grant the job's account pubsub.topics.publish on %s (roles/pubsub.publisher), or check Connection.CredentialsFile", topic)
	case codes.ResourceExhausted:
		return "Check the project's Pub/Sub publish quota, or lower MaxInFlightMessages/MaxInFlightBytes to publish less at once"
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled, codes.Aborted, codes.Internal:
		return fmt.Sprintf("The client retried for Publisher.Timeout %v; check that Pub/Sub is reachable from the workers, or raise Publisher.Timeout to ride out longer outages", w.cfg.Publisher.Timeout)
	default:
		return "Check the topic and the job's access to it"
	}
}

// park sets p aside for the destination's repair. Parked messages count
// against neither cap: they left the publisher, and the repair republishes
// the same messages.
func (w *writer) park(d *dest, p *pending, cause error) {
	d.parked = append(d.parked, p)
	if cause != nil {
		d.lastErr = cause
	}
}

// route applies the failure policy to a message Pub/Sub will not take.
func (w *writer) route(ctx context.Context, topic model.Topic, m model.Message, stage dlq.Stage, err error, attempts int) {
	w.stats.sendErrors++
	w.rejections++
	w.lastRejection = err
	switch w.cfg.FailurePolicy {
	case PolicyDrop:
		w.stats.dropped++
		w.warnf(ctx, "pubsubio: dropping a message to %s (FailurePolicy %s, stage %s, %d data bytes, ordering key %q): %v",
			topic, PolicyDrop, stage, len(m.Data), m.OrderingKey, err)
	case PolicyDeadLetter:
		w.stats.deadLettered++
		f := dlq.New(stage, m, err, attempts, w.now())
		f.Topic = topic
		w.emit(f)
	default:
		w.setErr(fmt.Errorf("pubsubio.Write: Pub/Sub will not take a message to %s (stage %s): %w; FailurePolicy is %s, so the bundle fails. Fix the message, or set FailurePolicy %s or %s to route such messages",
			topic, stage, err, PolicyFail, PolicyDrop, PolicyDeadLetter))
		return
	}
	if max := w.cfg.MaxConsecutiveRejections; max != -1 && w.rejections >= max {
		w.setErr(fmt.Errorf("pubsubio.Write: MaxConsecutiveRejections %d reached: %d messages in a row were rejected with no successful publish between them (last: %v); the stream looks refused wholesale. Fix the messages, or raise MaxConsecutiveRejections (-1 for no bound)",
			max, w.rejections, w.lastRejection))
	}
}

// rootRing remembers the last few root failures counted, so that the one
// error the client sets on every message of a failed batch is counted once.
type rootRing struct {
	errs [16]error
	next int
}

// sameError reports whether a and b are the same error value. Identity, not
// errors.Is: a status error's Is compares codes and messages, which would
// merge two distinct rejections that happen to read alike.
func sameError(a, b error) bool {
	t := reflect.TypeOf(a)
	return a != nil && t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// countRoot counts err in the error class of its code unless it was counted
// already.
func (w *writer) countRoot(code codes.Code, err error) {
	for _, seen := range w.roots.errs {
		if sameError(seen, err) {
			return
		}
	}
	w.roots.errs[w.roots.next] = err
	w.roots.next = (w.roots.next + 1) % len(w.roots.errs)
	w.stats.errorClass(code)
}
