package source

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// handle acks or nacks one delivery; *pubsub.Message is one.
type handle interface {
	Ack()
	Nack()
}

// deliveryState is where a delivery is in its split: received and not yet
// emitted, withheld while the budget was full, emitted and waiting for its
// bundle to commit, or gone.
type deliveryState uint8

const (
	buffered deliveryState = iota
	withheld               // kept leased without its payload until a bundle makes room (intake.go)
	pending
	gone // acked, given back, or superseded by a redelivery
)

// delivery is one received copy of a message.
type delivery struct {
	msg    model.Message
	handle handle
	ackID  ackID
	size   int64 // what it counts against the buffer budget
	decoded
	arrived time.Time
	drained time.Time // handed to a bundle to emit: where ack latency starts
	state   deliveryState
	seq     int64 // the bundle that emitted it, once pending
	n       int64 // its place in the split's arrival order, once buffered
	// exactlyOnce: its subscription has exactly-once delivery, so its ack
	// is answered (exactlyonce.go).
	exactlyOnce bool
	span        trace.Span // its receive span, under Config.Tracing (trace.go)
}

// outcome is how a delivery leaves its split.
type outcome uint8

const (
	ackIt  outcome = iota
	nackIt         // the subscriber keeps running and sends the nack
	// handBack is for a subscriber about to stop: the nack goes out with the
	// RPC once it stopped (sendByRPC). Neither Nack() nor the client's
	// NackImmediately shutdown can be relied on then: the client sends nacks
	// every 100 ms from a goroutine that returns as soon as the stream is
	// cancelled, and its shutdown's nack of what it holds races Receive
	// returning (RELIABILITY.md has the measurement).
	handBack
)

// ledger is what a split holds: every delivery from its arrival until it
// is acked or given back, and the acks the client may not have sent yet.
// Its methods run under the split reader's lock.
type ledger struct {
	budget    *budget
	stats     *stats
	givenBack *givenBack
	now       func() time.Time

	buffer     []*delivery // FIFO; entries no longer buffered are skipped when drained
	buffered   int
	arrivals   int64       // deliveries buffered so far: the next one's n
	leased     []*delivery // buffered, withheld or pending, in arrival order (holds.go)
	pending    map[ackID]*delivery
	held       map[string]*delivery // by message ID, buffered or pending
	recentAcks []recentAck
	answers    []ackAnswer // exactly-once acks whose answer is not counted yet (exactlyonce.go)

	// What is withheld while the budget is full, in arrival order, and what
	// was given back from it to come back, by message ID and counted per
	// ordering key (withheld.go).
	withheld     []*delivery
	returned     map[string]returnedMsg
	returnedKeys map[string]int
}

// recentAck is an ack handed to the client. The client sends acks every
// 100 ms, and a subscriber stopped in between drops what it had not sent
// (its sender returns as soon as the stream is cancelled), so a stop resends
// recent acks with the RPC.
type recentAck struct {
	id ackID
	at time.Time
}

// recentAckWindow is how long an ack counts as possibly unsent: ten of the
// client's ack intervals.
const recentAckWindow = time.Second

func newLedger(b *budget, s *stats, g *givenBack, now func() time.Time) ledger {
	return ledger{
		budget: b, stats: s, givenBack: g, now: now,
		pending: map[ackID]*delivery{}, held: map[string]*delivery{},
		returned: map[string]returnedMsg{}, returnedKeys: map[string]int{},
	}
}

// supersede gives back the copy of message id the split holds, if any: a
// redelivery after its lease lapsed replaces it, and its handle no longer
// acks anything.
func (l *ledger) supersede(id string) {
	if prev := l.held[id]; prev != nil {
		l.end(prev, nackIt, nackedSuperseded)
	}
}

// hold buffers d, whose room in the budget is reserved.
func (l *ledger) hold(d *delivery) {
	l.givenBack.seen(d.msg.ID)
	l.arrivals++
	d.n = l.arrivals
	l.lease(d)
	l.buffer = append(l.buffer, d)
	l.buffered++
	l.held[d.msg.ID] = d
	l.stats.add(messagesReceived, 1)
}

// end takes d out of the split, acking or giving it back, and counts a
// give-back under reason.
func (l *ledger) end(d *delivery, how outcome, reason counter) {
	switch d.state {
	case buffered:
		l.buffered--
		l.budget.free(1, d.size)
	case withheld:
		// counted against nothing
	case pending:
		delete(l.pending, d.ackID)
		l.stats.pendingAcks.Add(-1)
	case gone:
		return
	}
	d.state = gone
	if l.held[d.msg.ID] == d {
		delete(l.held, d.msg.ID)
	}
	switch how {
	case ackIt:
		l.sendAck(d)
		l.stats.add(messagesAcked, 1)
		return
	case nackIt:
		d.handle.Nack()
	}
	traceGivenBack(d, reason)
	l.stats.add(reason, 1)
	if returns(reason) {
		l.givenBack.add(d.msg.ID, d.msg.Subscription, d.eventTime, l.now())
	}
}

// returns reports whether a message given back for reason comes back to
// the read with its old event time: all but a stale copy (its fresh one is
// held) and a nack under DecodeNack (it is never emitted).
func returns(reason counter) bool {
	return reason != nackedSuperseded && reason != nackedDecode
}

// drain moves up to max buffered deliveries to pending under bundle seq and
// returns them in arrival order. It gives back what was withheld and fits
// the room the drain made, for Pub/Sub to redeliver into it.
func (l *ledger) drain(max int, seq int64, now time.Time) []*delivery {
	var out []*delivery
	var bytes int64
	i := 0
	for ; i < len(l.buffer) && len(out) < max; i++ {
		d := l.buffer[i]
		if d.state != buffered {
			continue
		}
		d.state, d.seq, d.drained = pending, seq, now
		l.buffered--
		bytes += d.size
		l.pending[d.ackID] = d
		l.stats.pendingAcks.Add(1)
		out = append(out, d)
	}
	l.buffer = l.buffer[i:]
	if len(out) > 0 {
		// Once for the batch: freeing room wakes every delivery waiting for it.
		l.budget.free(len(out), bytes)
	}
	l.returnWithheld(now)
	return out
}

// ack acks the deliveries among ids that bundle seq emitted and returns
// how many it acked. IDs it does not hold were acked already, or given
// back; those of another bundle were taken back and emitted again.
func (l *ledger) ack(ids []ackID, seq int64, now time.Time) int {
	l.pruneRecentAcks(now)
	n := 0
	for _, id := range ids {
		if d := l.pending[id]; d != nil && d.seq == seq {
			l.end(d, ackIt, 0)
			ackLatencies.record(now.Sub(d.drained))
			if !d.exactlyOnce { // its answer says whether it was sent
				l.recentAcks = append(l.recentAcks, recentAck{id: id, at: now})
			}
			n++
		}
	}
	return n
}

func (l *ledger) pruneRecentAcks(now time.Time) {
	i := 0
	for i < len(l.recentAcks) && now.Sub(l.recentAcks[i].at) > recentAckWindow {
		i++
	}
	// Moved to the front rather than resliced, so that appends reuse the
	// array instead of growing a new one.
	l.recentAcks = l.recentAcks[:copy(l.recentAcks, l.recentAcks[i:])]
}

// takeRecentAcks returns the ack IDs the client may not have sent yet.
func (l *ledger) takeRecentAcks(now time.Time) []string {
	l.pruneRecentAcks(now)
	ids := make([]ackID, len(l.recentAcks))
	for i, a := range l.recentAcks {
		ids[i] = a.id
	}
	l.recentAcks = nil
	return remoteAckIDs(ids)
}

// giveBackAll takes everything held out of the split, counting it under
// reason, and returns the ack IDs to nack with the RPC once the subscriber
// stopped (see handBack).
func (l *ledger) giveBackAll(reason counter) []string {
	var ids []ackID
	giveBack := func(d *delivery) {
		if d.state == gone {
			return
		}
		l.end(d, handBack, reason)
		ids = append(ids, d.ackID)
	}
	for _, d := range l.buffer {
		giveBack(d)
	}
	l.buffer = nil
	for _, d := range l.withheld {
		giveBack(d)
	}
	l.withheld = nil
	l.forgetAllReturned()
	for _, d := range l.pending {
		giveBack(d)
	}
	return remoteAckIDs(ids)
}

// giveBackEmitted gives back the deliveries among ids that bundle seq
// emitted: no commit will cover them.
func (l *ledger) giveBackEmitted(ids []ackID, seq int64) {
	for _, id := range ids {
		if d := l.pending[id]; d != nil && d.seq == seq {
			l.end(d, nackIt, nackedUncommitted)
		}
	}
}

// oldestBuffered is the oldest event time among deliveries not yet
// emitted, buffered or withheld, zero if none.
func (l *ledger) oldestBuffered() time.Time {
	var oldest time.Time
	for _, ds := range [][]*delivery{l.buffer, l.withheld} {
		for _, d := range ds {
			if d.state != pending && d.state != gone && (oldest.IsZero() || d.eventTime.Before(oldest)) {
				oldest = d.eventTime
			}
		}
	}
	return oldest
}

// sendByRPC sends acks and nacks with the RPCs, bounded by the shutdown
// timeout: once a subscriber stopped, the acks it may not have sent and the
// nacks of what it held (after the stop, so that no lease extension of the
// stopping client follows a nack), and the give-back of a failed bundle. A
// failure costs a redelivery after the ack deadline, not data: it is
// logged and counted.
func (r *splitReader) sendByRPC(conn puller, acks, nacks []string) {
	if conn == nil || len(acks)+len(nacks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer cancel()
	if len(acks) > 0 {
		if err := conn.acknowledge(ctx, acks); err != nil {
			r.stats.add(ackRPCFailures, 1)
			log.Warnf(ctx, "pubsubio.Read: resending %d acks of %s after stopping its subscriber failed; Pub/Sub redelivers them: %v", len(acks), r.split.Subscription, err)
		}
	}
	if len(nacks) > 0 {
		// Refused ack IDs (exactly-once) are leases already gone: given back.
		if err := conn.nack(ctx, nacks); err != nil && !refusedOnly(err) {
			r.stats.add(nackRPCFailures, 1)
			log.Warnf(ctx, "pubsubio.Read: giving back %d messages of %s failed; Pub/Sub redelivers them after their ack deadline: %v", len(nacks), r.split.Subscription, err)
		}
	}
}

// ackRemote acks, with the RPC, IDs emitted by another process: a residual
// that moved. It keeps the connection it dials for the split's subscriber,
// unless the split was released meanwhile. A failure is logged and
// counted: at-least-once holds, Pub/Sub redelivers.
func (r *splitReader) ackRemote(ctx context.Context, ids []ackID) {
	rpc := remoteAckIDs(ids)
	if len(rpc) == 0 {
		return
	}
	var exactlyOnce bool
	err := r.withConn(ctx, func(conn puller) error {
		err := conn.acknowledge(ctx, rpc)
		exactlyOnce = exactlyOnceOf(ctx, conn)
		return err
	})
	acked, err := r.remoteAcked(ctx, len(rpc), err, exactlyOnce)
	if err != nil {
		r.stats.add(ackRPCFailures, 1)
		log.Warnf(ctx, "pubsubio.Read: acking %d messages of %s emitted by another worker failed; Pub/Sub redelivers them: %v", len(rpc), r.split.Subscription, err)
		return
	}
	r.stats.add(acksRPC, acked)
	r.stats.add(messagesAcked, acked)
}

// withConn runs f on the split's connection, dialing one if the split has
// none yet, which the split then keeps (unless it was released meanwhile).
func (r *splitReader) withConn(ctx context.Context, f func(puller) error) error {
	r.mu.Lock()
	conn := r.conn
	r.mu.Unlock()
	if conn != nil {
		return f(conn)
	}
	conn, err := r.dial(ctx)
	if err != nil {
		return err
	}
	err = f(conn)
	r.mu.Lock()
	if r.conn == nil && !r.released {
		r.conn, conn = conn, nil
	}
	r.mu.Unlock()
	closeQuietly(conn)
	return err
}
