package sink

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// complete classifies one verdict on the DoFn's goroutine.
//
// Only data-shaped failures reach the failure policy: a message that breaks
// Pub/Sub's limits (checked before sending), one Pub/Sub rejected with
// INVALID_ARGUMENT when it was published alone, and one to a missing topic
// under CreateNever. INVALID_ARGUMENT is the only message-level code:
// Publish is a batch RPC, the client sets the one status on every message
// of the batch, and the other codes describe the service, not a message.
// Everything else fails the bundle, so an outage backpressures and restarts
// instead of bleeding the stream into a dropping policy.
func (w *writer) complete(ctx context.Context, o *outbound) {
	if o.epoch != w.epoch {
		o.endTrace(errDiscarded)
		return // from a bundle that failed; its elements are being retried
	}
	d := o.dest
	d.inflight--
	w.inflightMsgs--
	w.inflightBytes -= o.size
	if o.err == nil {
		o.endTrace(nil)
		w.stats.sent(w.cfg.PerDestinationMetrics, d.topic, o)
		w.rejections, w.lastRejection = 0, nil
		return
	}
	err := o.err
	o.traceFailure(err)
	// The client pauses an ordering key after any failure on it and fails
	// every later batch of the key with ErrPublishingPaused until
	// ResumePublish. Such a message has no failure of its own: it is parked
	// and republished once the key is resumed, whatever the disposition, and
	// never counted.
	if errors.As(err, new(pubsub.ErrPublishingPaused)) {
		w.stats.cascaded++
		w.park(d, o, nil)
		return
	}
	code, _ := grpccode.Of(err)
	switch {
	case code == codes.NotFound && w.cfg.CreateDisposition == CreateNever:
		w.countRoot(code, err)
		if w.cfg.FailurePolicy == model.PolicyFail {
			o.endTrace(err)
			w.fail(fmt.Errorf("pubsubio.Write: topic %s does not exist and CreateDisposition is %s: create it, fix the destination, or use %s: %w",
				d.topic, CreateNever, CreateIfNeeded, err))
			return
		}
		// A message to a topic that must not be created is a bad record
		// under a routing policy, like one Pub/Sub rejected.
		w.routeRejected(ctx, d, o, err)
	case code == codes.NotFound:
		w.countRoot(code, err)
		d.notFound = true
		w.park(d, o, err)
	case code == codes.InvalidArgument && o.solo:
		// A verdict of its own: a confirmed rejection.
		w.countRoot(code, err)
		w.routeRejected(ctx, d, o, err)
	case code == codes.InvalidArgument:
		// A verdict on the batch, not on this message: republish it alone
		// (repair.go). Not counted: the batch's one status is on every
		// message of it.
		o.isolate = true
		w.park(d, o, err)
	default:
		w.countRoot(code, err)
		o.endTrace(err)
		w.fail(fmt.Errorf("pubsubio.Write: publishing to %s failed with %s after the client's retries: %s: %w",
			d.topic, grpccode.Name(code), w.outageHint(code, d.topic), err))
	}
}

// routeRejected applies the failure policy to o, which Pub/Sub refused for
// itself. The client paused o's ordering key, if it has one: the next
// repair or drain resumes it.
func (w *writer) routeRejected(ctx context.Context, d *dest, o *outbound, err error) {
	o.endTrace(err)
	if o.msg.OrderingKey != "" {
		d.paused[o.msg.OrderingKey] = true
	}
	w.route(ctx, routed{topic: d.topic, msg: o.msg, eventTime: o.eventTime, stage: dlq.StagePublish, attempts: o.attempts}, err)
}

// outageHint says what to check after a publish failed for a reason that
// is not the message's.
func (w *writer) outageHint(code codes.Code, topic model.Topic) string {
	switch code {
	case codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Sprintf("grant the job's account roles/pubsub.publisher on %s, or check Connection.CredentialsFile", topic)
	case codes.ResourceExhausted:
		return "check the project's publish quota, or lower MaxInFlightMessages/MaxInFlightBytes"
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled, codes.Aborted, codes.Internal:
		return fmt.Sprintf("check that Pub/Sub at %s is reachable from the workers, or raise Publisher.Timeout %v to ride out longer outages", w.cfg.Connection.Endpoint(), w.cfg.Publisher.Timeout)
	default:
		return "check the topic and the job's access to it"
	}
}

// park sets o aside for the destination's repair. Parked messages count
// against neither cap: they left the publisher, and the repair republishes
// the same messages.
func (w *writer) park(d *dest, o *outbound, cause error) {
	d.parked = append(d.parked, o)
	if cause != nil {
		d.lastErr = cause
	}
}

// routed is a message for the failure policy: where it was going, at which
// stage it failed, after how many publish attempts, and its event time.
type routed struct {
	topic     model.Topic
	msg       model.Message
	eventTime time.Time
	stage     dlq.FailureStage
	attempts  int
}

// route applies the failure policy to a message Pub/Sub will not take.
func (w *writer) route(ctx context.Context, r routed, err error) {
	w.stats.sendErrors.Add(1)
	w.rejections++
	w.lastRejection = err
	switch w.cfg.FailurePolicy {
	case model.PolicyDrop:
		w.stats.dropped.Add(1)
		w.warnf(ctx, "pubsubio.Write: dropping a message to %s (FailurePolicy %s, stage %s, %d data bytes): %v",
			r.topic, model.PolicyDrop, r.stage, len(r.msg.Data), err)
	case model.PolicyDeadLetter:
		w.stats.deadLettered.Add(1)
		f := dlq.New(r.stage, r.msg, err, r.attempts, w.now())
		f.Topic = r.topic
		w.deadLetters = append(w.deadLetters, deadLetter{eventTime: r.eventTime, failed: f})
	default:
		w.fail(fmt.Errorf("pubsubio.Write: Pub/Sub will not take a message to %s (stage %s) and FailurePolicy is %s: fix the message, or route such messages with %s or %s: %w",
			r.topic, r.stage, model.PolicyFail, model.PolicyDrop, model.PolicyDeadLetter, err))
		return
	}
	if max := w.cfg.MaxConsecutiveRejections; max != -1 && w.rejections >= max {
		w.fail(fmt.Errorf("pubsubio.Write: MaxConsecutiveRejections %d reached: %d messages in a row were rejected, none published between them (last: %w); fix the messages, or raise MaxConsecutiveRejections (-1 for no bound)",
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
