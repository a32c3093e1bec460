package source

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/googleapis/gax-go/v2/apierror"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
)

// Exactly-once delivery. On a subscription that has it, Pub/Sub answers
// every ack: an ack it confirmed is final (the message is not delivered
// again), one it refused (the ack ID expired with its lease, or a
// redelivery superseded it) is a redelivery to come. The read acks such a
// message with AckWithResult once the runner committed its bundle, and
// the bundle that sent the acks waits for the answers, bounded by
// Connection.RPCTimeout, and counts them: acks_confirmed,
// acks_failed_<CODE>, and acks_unconfirmed for those not answered in time.
//
// Acks sent with the Acknowledge RPC (a residual resumed in another
// process) are answered by the RPC: Pub/Sub takes the request in part and
// names each ack ID it refused, with a reason, in the error's ErrorInfo
// metadata (sendByID). The client's own rules stay the client's: it
// extends leases by at least 60 s and hands a message to the read only
// once its receipt modack succeeded, so a message whose receipt Pub/Sub
// refused never reaches a bundle (TestExactlyOnceReceiptRefused).

// ackAnswer is an exactly-once ack whose answer is not counted yet, and
// the receive span that ends with it.
type ackAnswer struct {
	result  *pubsub.AckResult
	span    trace.Span
	emitted time.Time
}

// sendAck acks d through its handle, and asks for the answer when d's
// subscription has exactly-once delivery.
func (l *ledger) sendAck(d *delivery) {
	if m, ok := d.handle.(*pubsub.Message); ok && d.exactlyOnce {
		l.answers = append(l.answers, ackAnswer{result: m.AckWithResult(), span: d.span, emitted: d.drained})
		return
	}
	d.handle.Ack()
	traceAcked(d.span, d.drained, l.now(), nil)
}

// confirmAcks waits, bounded by Connection.RPCTimeout, for the answers to
// the exactly-once acks the split sent, and counts them. A refused ack
// does not fail the bundle: its message was committed, and Pub/Sub
// delivers it again.
func (r *splitReader) confirmAcks(ctx context.Context) {
	r.mu.Lock()
	answers := r.ledger.answers
	r.ledger.answers = nil
	r.mu.Unlock()
	if len(answers) == 0 {
		return
	}
	sub := r.split.Subscription
	waitErr := r.cfg.Connection.Call(ctx, "pubsubio.Read", "Acknowledge "+sub.String()+" (exactly-once answers)", func(ctx context.Context) error {
		for _, a := range answers {
			select {
			case <-a.result.Ready():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	var confirmed, unconfirmed int
	refused := map[codes.Code]int{}
	var lastRefusal error
	why := waitErr
	now := r.now()
	for _, a := range answers {
		select {
		case <-a.result.Ready():
		default:
			unconfirmed++
			traceAcked(a.span, a.emitted, now, errNoAnswer)
			continue
		}
		st, err := a.result.Get(context.Background()) // ready: returns at once
		switch code, failed := refusalCode(st); {
		case err == nil && st == pubsub.AcknowledgeStatusSuccess:
			confirmed++
		case failed:
			refused[code]++
			lastRefusal = err
		default:
			unconfirmed++
			why = err
		}
		traceAcked(a.span, a.emitted, now, err)
	}
	r.stats.add(acksConfirmed, confirmed)
	r.stats.add(acksUnconfirmed, unconfirmed)
	r.countRefused(ctx, refused, len(answers), lastRefusal)
	if unconfirmed > 0 {
		log.Warnf(ctx, "pubsubio.Read: %d of %d exactly-once acks of %s were not confirmed (counted in acks_unconfirmed): %v; Pub/Sub delivers again any it did not take",
			unconfirmed, len(answers), sub, why)
	}
}

// errNoAnswer ends the receive span of an exactly-once ack Pub/Sub did
// not answer in time.
var errNoAnswer = errors.New("no answer to the exactly-once ack within Connection.RPCTimeout")

// refusalCode reports whether st refuses the ack for good, and the gRPC
// code of the refusal. The client says so of an ack ID Pub/Sub refused
// and of a request refused for lack of permission or a failed
// precondition; any other error (the ack shared a request with a refused
// one, the subscriber stopped, retries ran out) confirms nothing either
// way.
func refusalCode(st pubsub.AcknowledgeStatus) (codes.Code, bool) {
	switch st {
	case pubsub.AcknowledgeStatusInvalidAckID:
		return codes.InvalidArgument, true
	case pubsub.AcknowledgeStatusFailedPrecondition:
		return codes.FailedPrecondition, true
	case pubsub.AcknowledgeStatusPermissionDenied:
		return codes.PermissionDenied, true
	}
	return codes.OK, false
}

// countRefused counts refused acks by code, out of sent, and says in one
// line what they mean.
func (r *splitReader) countRefused(ctx context.Context, refused map[codes.Code]int, sent int, last error) {
	if len(refused) == 0 {
		return
	}
	total := 0
	var byCode []string
	for _, code := range slices.Sorted(maps.Keys(refused)) {
		n := refused[code]
		total += n
		r.stats.failedAcks.Add(failedAcksName(code), int64(n))
		byCode = append(byCode, fmt.Sprintf("%d %s", n, grpccode.Name(code)))
	}
	log.Warnf(ctx, "pubsubio.Read: Pub/Sub refused %d of %d exactly-once acks of %s (%s; last: %v). Their bundles had committed, so nothing is lost: Pub/Sub delivers those messages again and the pipeline sees them twice. "+
		"INVALID_ARGUMENT means the ack ID expired with its lease or was superseded by a redelivery (commits slower than MaxExtension, or a restarted subscriber)",
		total, sent, r.split.Subscription, strings.Join(byCode, ", "), last)
}

// failedAcksName is the counter of acks Pub/Sub refused with code.
func failedAcksName(code codes.Code) string { return "acks_failed_" + grpccode.Name(code) }

// ackIDsRefused is the answer to an Acknowledge or ModifyAckDeadline
// request on an exactly-once subscription that Pub/Sub took only in part:
// the ack IDs it refused, each with the reason it gave, and the request's
// status code. It took the others.
type ackIDsRefused struct {
	code    codes.Code
	reasons map[string]string // by ack ID: PERMANENT_FAILURE_INVALID_ACK_ID, ...
	// unconfirmed counts the ack IDs that shared a request with a refused
	// one: Pub/Sub took them, but, as the client does, the read counts
	// them as not confirmed.
	unconfirmed int
}

func (e *ackIDsRefused) Error() string {
	why := map[string]int{}
	for _, r := range e.reasons {
		why[r]++
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(why)) {
		parts = append(parts, fmt.Sprintf("%d %s", why[r], r))
	}
	return fmt.Sprintf("Pub/Sub refused %d ack IDs with %s (%s), and took %d sent with them", len(e.reasons), grpccode.Name(e.code), strings.Join(parts, ", "), e.unconfirmed)
}

// add records the refusal of id for reason, or, with an empty id, one ack
// ID taken in a request that refused others.
func (e *ackIDsRefused) add(code codes.Code, id, reason string) *ackIDsRefused {
	if e == nil {
		e = &ackIDsRefused{code: code, reasons: map[string]string{}}
	}
	if id == "" {
		e.unconfirmed++
	} else {
		e.reasons[id] = reason
	}
	return e
}

// maxAckIDsPerRequest keeps an Acknowledge request well under Pub/Sub's
// 512 KB request limit (ack IDs are a few hundred bytes).
const maxAckIDsPerRequest = 1000

// transientRetries bounds how often sendByID resends ack IDs Pub/Sub
// refused for a transient reason, backing off from transientBackoff.
const (
	transientRetries = 4
	transientBackoff = 100 * time.Millisecond
)

// sendByID sends ackIDs with send in requests of at most
// maxAckIDsPerRequest. An exactly-once subscription may refuse some ack
// IDs of a request and take the rest: those refused for a transient reason
// are sent again, and those refused for good are returned, with every
// other request still sent, as an *ackIDsRefused. Any other failure ends
// it and is returned as is.
func sendByID(ctx context.Context, ackIDs []string, send func([]string) error) error {
	var refused *ackIDsRefused
	for len(ackIDs) > 0 {
		n := min(len(ackIDs), maxAckIDsPerRequest)
		chunk := ackIDs[:n]
		ackIDs = ackIDs[n:]
		for attempt := 0; len(chunk) > 0; attempt++ {
			err := send(chunk)
			code, reasons := refusedAckIDs(err, chunk)
			if reasons == nil {
				if err != nil {
					return err
				}
				break
			}
			var again []string
			for _, id := range chunk {
				switch why, ok := reasons[id]; {
				case !ok:
					refused = refused.add(code, "", "")
				case strings.HasPrefix(why, "TRANSIENT_") && attempt < transientRetries:
					again = append(again, id)
				default:
					refused = refused.add(code, id, why)
				}
			}
			if len(again) > 0 && !sleep(ctx, transientBackoff<<attempt) {
				for _, id := range again {
					refused = refused.add(code, id, reasons[id])
				}
				again = nil
			}
			chunk = again
		}
	}
	if refused != nil {
		return refused
	}
	return nil
}

// refusedAckIDs returns, from err, the status code and the reason Pub/Sub
// gave for each of sent that it refused; nil reasons if err refused none
// by ID (err is nil, or the whole request failed).
func refusedAckIDs(err error, sent []string) (codes.Code, map[string]string) {
	ae, ok := apierror.FromError(err)
	if !ok {
		return codes.OK, nil
	}
	md := ae.Metadata()
	var reasons map[string]string
	for _, id := range sent {
		if why, ok := md[id]; ok {
			if reasons == nil {
				reasons = map[string]string{}
			}
			reasons[id] = why
		}
	}
	return ae.GRPCStatus().Code(), reasons
}

// sleep waits d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// refusedOnly reports whether err is only Pub/Sub refusing some ack IDs
// (sendByID): for a nack, leases that were already gone.
func refusedOnly(err error) bool {
	var refused *ackIDsRefused
	return errors.As(err, &refused)
}

// remoteAcked counts the answer, err, to acking sent ack IDs with the RPC
// on a subscription with exactlyOnce delivery or not. It returns how many
// Pub/Sub took, and err unless Pub/Sub only refused some ack IDs: those
// are counted and logged here, and come back as redeliveries.
func (r *splitReader) remoteAcked(ctx context.Context, sent int, err error, exactlyOnce bool) (int, error) {
	var refused *ackIDsRefused
	if err != nil && !errors.As(err, &refused) {
		return 0, err
	}
	acked, unconfirmed := sent, 0
	if refused != nil {
		acked -= len(refused.reasons)
		unconfirmed = refused.unconfirmed
		if len(refused.reasons) > 0 {
			r.countRefused(ctx, map[codes.Code]int{refused.code: len(refused.reasons)}, sent, refused)
		}
	}
	if exactlyOnce {
		r.stats.add(acksConfirmed, acked-unconfirmed)
		r.stats.add(acksUnconfirmed, unconfirmed)
	}
	return acked, nil
}

// exactlyOnceOf reports whether conn's subscription has exactly-once
// delivery, describing it if conn has not seen it yet (a connection dialed
// to ack a residual that moved here); false if that fails.
func exactlyOnceOf(ctx context.Context, conn puller) bool {
	on, known := conn.exactlyOnce()
	if !known && conn.describe(ctx) == nil {
		on, _ = conn.exactlyOnce()
	}
	return on
}
