package source

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// handle acks or nacks one delivery; *pubsub.Message is one.
type handle interface {
	Ack()
	Nack()
}

type deliveryState uint8

const (
	buffered deliveryState = iota // received, not yet emitted
	pending                       // emitted, waiting for its bundle to commit
	settled                       // acked, nacked or superseded
)

// syntheticAckIDPrefix marks the key of a message whose ack ID could not be
// read (ackid.go): acked in-process only, never with the RPC.
const syntheticAckIDPrefix = "message:"

// delivery is one received copy of a message.
type delivery struct {
	msg       model.Message
	handle    handle
	ackID     string
	size      int64
	eventTime time.Time
	eventErr  error
	arrived   time.Time
	drained   time.Time // handed to a bundle to emit: where ack latency starts
	state     deliveryState
	seq       int64 // the bundle that emitted it, once pending
}

// splitReader is one split's subscriber and everything it holds. The
// client's callback only appends to the buffer; bundles drain it. It lives
// in the registry across bundles and is released when no longer polled.
type splitReader struct {
	split   Split
	cfg     Config
	budget  *budget
	stats   *stats
	now     func() time.Time
	dial    func(context.Context) (subscription, error)
	created time.Time

	mu         sync.Mutex
	sub        subscription
	running    *receiveRun
	stopping   *receiveRun // stopped by stopLocked, its Receive not yet returned
	buffer     []*delivery // FIFO; superseded entries are skipped when drained
	buffered   int
	pending    map[string]*delivery // by ack ID
	held       map[string]*delivery // by message ID, buffered or pending
	lastPolled time.Time
	// lastArrival is the latest delivery or (re)start of the subscriber,
	// whichever is later: idleness counts only time spent listening (see
	// snapshot), so a subscriber stopped at the budget during a long
	// downstream stall does not make a bounded read look idle.
	lastArrival time.Time
	newestEmit  time.Time
	recentAcks  []recentAck
	failure     error
	started     bool
	released    bool
	// waiting counts deliveries waiting for room in the budget.
	waiting int
	// budgetWait is budgetWaitFor(cfg); tests change it.
	budgetWait time.Duration
}

// recentAck is an ack handed to the client. The client sends acks every
// 100 ms, and a subscriber stopped in between drops what it had not sent
// (its sender returns as soon as the stream is cancelled), so a stop resends
// recent acks with the RPC.
type recentAck struct {
	id string
	at time.Time
}

// recentAckWindow is how long an ack counts as possibly unsent: ten of the
// client's ack intervals.
const recentAckWindow = time.Second

// receiveRun is one Receive call; a reader restarts with a new one.
type receiveRun struct {
	ctx      context.Context // done once the run is stopped
	cancel   context.CancelFunc
	done     chan struct{}
	stopping bool
}

func newSplitReader(split Split, cfg Config, b *budget, s *stats, now func() time.Time, dial func(context.Context) (subscription, error)) *splitReader {
	t := now()
	return &splitReader{
		split: split, cfg: cfg, budget: b, stats: s, now: now, dial: dial,
		created: t, lastPolled: t, lastArrival: t,
		budgetWait: budgetWaitFor(cfg),
		pending:    map[string]*delivery{},
		held:       map[string]*delivery{},
	}
}

// poll marks the split as polled, starts its subscriber if it is not
// running, and reports a failure the subscriber stopped with.
func (r *splitReader) poll(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastPolled = r.now()
	if r.released {
		// Released by the janitor between the registry lookup and now: the
		// bundle emits nothing and the next one finds a fresh reader.
		return nil
	}
	if err := r.failure; err != nil {
		r.failure = nil // reported once; a retried bundle starts afresh
		return err
	}
	if r.running != nil {
		return nil
	}
	if r.stopping != nil {
		// A stopping run gives back, as its Receive returns, everything its
		// connection pulled and did not deliver (pulled.go): a new run on
		// the same connection waits for that, or it would include its pulls.
		select {
		case <-r.stopping.done:
			r.stopping = nil
		default:
			return nil
		}
	}
	if r.sub == nil {
		sub, err := r.dial(ctx)
		if err != nil {
			return err
		}
		r.sub = sub
	}
	if r.started {
		r.stats.add(subscriberRestarts, 1)
	}
	r.started = true
	r.lastArrival = r.now()
	runCtx, cancel := context.WithCancel(context.Background())
	run := &receiveRun{ctx: runCtx, cancel: cancel, done: make(chan struct{})}
	r.running = run
	go r.receive(runCtx, run, r.sub)
	return nil
}

func (r *splitReader) receive(ctx context.Context, run *receiveRun, sub subscription) {
	err := sub.receive(ctx, func(m *pubsub.Message) bool { return r.deliver(run, m, m, ackIDOf(m)) })
	close(run.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == run {
		// Stopped by itself: the stream failed permanently. Nothing held is
		// valid any more; give it back so Pub/Sub redelivers it at once.
		r.running = nil
		nacks := r.giveBackAllLocked(nackedShutdown)
		if err == nil {
			err = fmt.Errorf("the subscriber stopped without an error")
		}
		r.failure = describeReceiveError(r.split.Subscription, err)
		go r.settleByRPC(sub, r.takeRecentAcksLocked(), nacks)
		return
	}
	if err != nil && run.stopping {
		r.stats.add(failuresAbsorbed, 1)
		log.Warnf(context.Background(), "pubsubio: subscriber of %s failed while stopping (absorbed: its messages were already nacked): %v", r.split.Subscription, err)
	}
}

// describeReceiveError says what to do about a stream that failed.
func describeReceiveError(sub model.Subscription, err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("pubsubio: subscription %s does not exist: create it or fix Subscriptions: %w", sub, err)
	case codes.PermissionDenied:
		return fmt.Errorf("pubsubio: permission denied reading %s: the worker's credentials need pubsub.subscriptions.consume on it (roles/pubsub.subscriber): %w", sub, err)
	}
	return fmt.Errorf("pubsubio: reading %s failed: %w", sub, err)
}

// deliver is the client's callback: it only buffers, and blocks the client
// only while the buffer budget is full, for at most budgetWait, after
// which the subscriber is stopped (under ordering, the client runs a key's
// next callback only after this one returns). It reports whether it took
// the message; one it did not take is given back with the RPC once the
// subscriber stopped (subscription.receive).
func (r *splitReader) deliver(run *receiveRun, m *pubsub.Message, h handle, ackID string) bool {
	size := int64(len(m.Data) + len(m.OrderingKey))
	for k, v := range m.Attributes {
		size += int64(len(k) + len(v))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running != run {
		h.Nack()
		r.stats.add(nackedShutdown, 1)
		return false
	}
	if prev := r.held[m.ID]; prev != nil {
		r.settleLocked(prev, nackIt, nackedSuperseded)
	}
	if !r.budget.reserve(size) && !r.awaitRoomLocked(run, size) {
		if r.running != run {
			h.Nack()
			r.stats.add(nackedShutdown, 1)
			return false
		}
		// Not nacked here: it is not taken, so once the stop below ends the
		// subscriber it is given back with the RPC, with what the client
		// pulled and never delivered (pulled.go).
		r.stats.add(nackedBudget, 1)
		log.Warnf(context.Background(), "pubsubio: buffer budget of %d messages / %d bytes reached and no bundle made room within %v; stopping the subscriber of %s until it is polled again (raise BufferMaxMessages/BufferMaxBytes if ordinary bursts reach it)", r.cfg.BufferMaxMessages, r.cfg.BufferMaxBytes, r.budgetWait, r.split.Subscription)
		r.stopLocked(nackedBudget)
		return false
	}
	now := r.now()
	d := &delivery{
		msg: model.Message{
			ID:           m.ID,
			Data:         m.Data,
			Attributes:   m.Attributes,
			OrderingKey:  m.OrderingKey,
			PublishTime:  m.PublishTime,
			Subscription: r.split.Subscription,
		},
		handle:  h,
		ackID:   ackID,
		size:    size,
		arrived: now,
	}
	if m.DeliveryAttempt != nil {
		d.msg.DeliveryAttempt = *m.DeliveryAttempt
	}
	if d.ackID == "" {
		// Without an ack ID the message can still be acked in-process.
		d.ackID = syntheticAckIDPrefix + m.ID
	}
	d.eventTime, d.eventErr = eventTime(r.cfg.TimestampAttribute, m.Attributes, m.PublishTime)
	r.buffer = append(r.buffer, d)
	r.buffered++
	r.held[m.ID] = d
	r.lastArrival = now
	r.stats.add(messagesReceived, 1)
	return true
}

// awaitRoomLocked waits, without the lock, up to budgetWait for room in
// the full budget (see budgetWait) and reports whether it reserved size.
// Meanwhile the split counts as listening, not idle (snapshot). It reports
// false, holding nothing, if run stopped meanwhile.
func (r *splitReader) awaitRoomLocked(run *receiveRun, size int64) bool {
	r.waiting++
	wait := r.budgetWait
	r.mu.Unlock()
	ok := r.budget.reserveWithin(run.ctx, size, wait)
	r.mu.Lock()
	r.waiting--
	if ok && r.running != run {
		r.budget.release(1, size)
		return false
	}
	return ok
}

// settlement is how a delivery leaves the split.
type settlement uint8

const (
	ackIt  settlement = iota
	nackIt            // the subscriber keeps running and sends the nack
	// handBack is for a subscriber about to stop: the nack goes out with the
	// RPC once it stopped (settleByRPC). Neither Nack() nor the client's
	// NackImmediately shutdown can be relied on then: the client sends nacks
	// every 100 ms from a goroutine that returns as soon as the stream is
	// cancelled, and its shutdown's nack of the inventory races Receive
	// returning (measured on the emulator: 0 of 100 held messages came back
	// within 40 s, where an explicit nack brought all 100 at once).
	handBack
)

// settleLocked takes d out of the split, acking or giving it back, and
// counts a give-back under reason.
func (r *splitReader) settleLocked(d *delivery, how settlement, reason counter) {
	switch d.state {
	case buffered:
		r.buffered--
		r.budget.release(1, d.size)
	case pending:
		delete(r.pending, d.ackID)
		r.stats.pendingAcks.Add(-1)
	case settled:
		return
	}
	d.state = settled
	if r.held[d.msg.ID] == d {
		delete(r.held, d.msg.ID)
	}
	switch how {
	case ackIt:
		d.handle.Ack()
		r.stats.add(messagesAcked, 1)
		return
	case nackIt:
		d.handle.Nack()
	}
	r.stats.add(reason, 1)
}

// drain moves up to max buffered messages to pending under bundle seq and
// returns them in arrival order.
func (r *splitReader) drain(max int, seq int64) []*delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*delivery
	var bytes int64
	now := r.now()
	i := 0
	for ; i < len(r.buffer) && len(out) < max; i++ {
		d := r.buffer[i]
		if d.state != buffered {
			continue
		}
		d.state, d.seq, d.drained = pending, seq, now
		r.buffered--
		bytes += d.size
		r.pending[d.ackID] = d
		r.stats.pendingAcks.Add(1)
		out = append(out, d)
	}
	r.buffer = r.buffer[i:]
	if len(out) > 0 {
		// Once for the batch: a release wakes every delivery waiting for room.
		r.budget.release(len(out), bytes)
	}
	return out
}

// noteEmitted records the newest event time emitted, for the watermark.
func (r *splitReader) noteEmitted(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.After(r.newestEmit) {
		r.newestEmit = t
	}
}

// ack acks the pending messages among ackIDs and returns how many it acked.
// IDs it does not hold were acked already, or given back and redelivered.
func (r *splitReader) ack(ackIDs []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.pruneRecentAcksLocked(now)
	n := 0
	for _, id := range ackIDs {
		if d := r.pending[id]; d != nil {
			r.settleLocked(d, ackIt, 0)
			ackLatencies.record(now.Sub(d.drained))
			r.recentAcks = append(r.recentAcks, recentAck{id: id, at: now})
			n++
		}
	}
	return n
}

func (r *splitReader) pruneRecentAcksLocked(now time.Time) {
	i := 0
	for i < len(r.recentAcks) && now.Sub(r.recentAcks[i].at) > recentAckWindow {
		i++
	}
	r.recentAcks = r.recentAcks[i:]
}

// takeRecentAcksLocked returns the ack IDs the client may not have sent yet.
func (r *splitReader) takeRecentAcksLocked() []string {
	r.pruneRecentAcksLocked(r.now())
	ids := make([]string, 0, len(r.recentAcks))
	for _, a := range r.recentAcks {
		if !strings.HasPrefix(a.id, syntheticAckIDPrefix) {
			ids = append(ids, a.id)
		}
	}
	r.recentAcks = nil
	return ids
}

// settleByRPC sends, once a subscriber stopped, the acks it may not have
// sent and the nacks of what it held, with the RPCs, bounded by the
// shutdown timeout. After the stop, so that no lease extension of the
// stopping client follows a nack. A failure costs a redelivery after the
// ack deadline, not data: it is logged and counted.
func (r *splitReader) settleByRPC(sub subscription, acks, nacks []string) {
	if sub == nil || len(acks)+len(nacks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer cancel()
	if len(acks) > 0 {
		if err := sub.acknowledge(ctx, acks); err != nil {
			r.stats.add(ackRPCFailures, 1)
			log.Warnf(ctx, "pubsubio: resending %d acks of %s while stopping its subscriber failed; Pub/Sub will redeliver them: %v", len(acks), r.split.Subscription, err)
		}
	}
	if len(nacks) > 0 {
		if err := sub.nack(ctx, nacks); err != nil {
			r.stats.add(nackRPCFailures, 1)
			log.Warnf(ctx, "pubsubio: giving back %d messages of %s failed; Pub/Sub redelivers them after their ack deadline: %v", len(nacks), r.split.Subscription, err)
		}
	}
}

// acknowledgeRemote acks, with the RPC, IDs emitted by another process.
// It keeps the connection it dials for the split's subscriber, unless the
// split was released meanwhile.
func (r *splitReader) acknowledgeRemote(ctx context.Context, ackIDs []string) error {
	r.mu.Lock()
	sub := r.sub
	r.mu.Unlock()
	if sub != nil {
		return sub.acknowledge(ctx, ackIDs)
	}
	sub, err := r.dial(ctx)
	if err != nil {
		return err
	}
	err = sub.acknowledge(ctx, ackIDs)
	r.mu.Lock()
	if r.sub == nil && !r.released {
		r.sub, sub = sub, nil
	}
	r.mu.Unlock()
	closeQuietly(sub)
	return err
}

// giveBack nacks what bundles seq and later emitted and did not ack: the
// runner discarded their output (a failed or retried bundle).
func (r *splitReader) giveBack(fromSeq int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.pending {
		if d.seq >= fromSeq {
			r.settleLocked(d, nackIt, nackedUncommitted)
		}
	}
}

// nackOne nacks one pending delivery at once, through its subscriber, so
// that Pub/Sub counts the delivery attempt and redelivers it (or forwards it
// to the subscription's dead-letter topic) without waiting for a deadline.
func (r *splitReader) nackOne(d *delivery, reason counter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settleLocked(d, nackIt, reason)
}

// giveBackAllLocked takes everything held out of the split, counting it
// under reason, and returns the ack IDs to nack once the subscriber
// stopped (see handBack).
func (r *splitReader) giveBackAllLocked(reason counter) []string {
	var ids []string
	giveBack := func(d *delivery) {
		if d.state == settled {
			return
		}
		r.settleLocked(d, handBack, reason)
		if !strings.HasPrefix(d.ackID, syntheticAckIDPrefix) {
			ids = append(ids, d.ackID)
		}
	}
	for _, d := range r.buffer {
		giveBack(d)
	}
	r.buffer = nil
	for _, d := range r.pending {
		giveBack(d)
	}
	return ids
}

// stopLocked gives everything held back and stops the subscriber, which
// the next poll restarts. It returns the stopped run, nil if none was
// running.
func (r *splitReader) stopLocked(reason counter) *receiveRun {
	nacks := r.giveBackAllLocked(reason)
	run := r.running
	if run == nil {
		return nil
	}
	r.running = nil
	r.stopping = run
	run.stopping = true
	run.cancel()
	acks, sub := r.takeRecentAcksLocked(), r.sub
	go func() {
		r.awaitStop(run)
		r.settleByRPC(sub, acks, nacks)
		r.mu.Lock()
		if r.stopping == run {
			r.stopping = nil // abandoned after ShutdownTimeout: a new run may start anyway
		}
		r.mu.Unlock()
	}()
	return run
}

// awaitStop waits one shutdown timeout for a stopped run and counts it
// abandoned if it does not end.
func (r *splitReader) awaitStop(run *receiveRun) bool {
	t := time.NewTimer(r.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-run.done:
		return true
	case <-t.C:
		r.stats.add(shutdownsAbandoned, 1)
		log.Warnf(context.Background(), "pubsubio: the subscriber of %s did not stop within ShutdownTimeout %v; abandoned (its messages wait out their ack deadline)", r.split.Subscription, r.cfg.ShutdownTimeout)
		return false
	}
}

// release stops the split for good: everything held goes back to Pub/Sub,
// and the client is closed once its subscriber ended.
func (r *splitReader) release(reason counter) {
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return
	}
	r.released = true
	nacks := r.giveBackAllLocked(reason)
	run := r.running
	r.running = nil
	if run != nil {
		run.stopping = true
		run.cancel()
	}
	sub := r.sub
	r.sub = nil
	acks := r.takeRecentAcksLocked()
	r.mu.Unlock()
	stopped := run == nil || r.awaitStop(run)
	r.settleByRPC(sub, acks, nacks)
	if !stopped {
		go func() { <-run.done; closeQuietly(sub) }()
		return
	}
	closeQuietly(sub)
}

func closeQuietly(sub subscription) {
	if sub != nil {
		_ = sub.close()
	}
}

// touch marks the split as in use; the registry calls it under its lock so
// the janitor cannot release a split between lookup and poll.
func (r *splitReader) touch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastPolled = r.now()
}

// idleSince reports whether the split has not been polled since t.
func (r *splitReader) idleSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastPolled.Before(t)
}

// snapshot is what the bundle needs to decide how to continue and where the
// watermark goes.
type snapshot struct {
	buffered      int
	lastArrival   time.Time
	newestEmitted time.Time
	// oldestRecent is the oldest event time among buffered messages that
	// arrived after the cutoff passed to snapshot (zero if none).
	oldestRecent time.Time
}

func (r *splitReader) snapshot(cutoff time.Time) snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := snapshot{buffered: r.buffered, lastArrival: r.lastArrival, newestEmitted: r.newestEmit}
	if r.running == nil || r.waiting > 0 {
		// Stopped (at the budget, or failed) and not yet restarted, or
		// holding deliveries back until the budget has room: the split is
		// not listening, so it cannot be idle. Without this, a bundle that
		// stalled downstream past IdleTimeout would end a bounded read with
		// the backlog the budget gave back, or held back, unread.
		s.lastArrival = r.now()
	}
	for _, d := range r.buffer {
		if d.state != buffered || d.eventErr != nil || d.arrived.Before(cutoff) {
			continue
		}
		if s.oldestRecent.IsZero() || d.eventTime.Before(s.oldestRecent) {
			s.oldestRecent = d.eventTime
		}
	}
	return s
}
