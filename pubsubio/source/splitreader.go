package source

import (
	"context"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/commit"
)

// splitReader is one split's subscriber and everything it holds. The
// client's callback only buffers (intake.go); bundles drain the buffer
// (bundle.go); the ledger (acklifecycle.go) holds every delivery until it
// is acked or given back. A reader lives in the registry across bundles
// and is released when no longer polled. This file is its lifecycle:
// starting the subscriber, stopping it, releasing the split.
type splitReader struct {
	split  Split
	cfg    Config
	budget *budget
	stats  *stats
	now    func() time.Time
	dial   func(context.Context) (puller, error)

	mu       sync.Mutex
	ledger   ledger
	conn     puller
	running  *receiveRun
	stopping *receiveRun // stopped by stopLocked, its Receive not yet returned
	// lastPolled is when a bundle last began or ended (or the registry
	// handed the reader out): LeaseIdle counts from it, and not while a
	// bundle runs (inBundle), however long a stage fused after the read
	// keeps it: the split is in use, and what it holds is needed when the
	// bundle ends.
	lastPolled time.Time
	inBundle   bool
	// lastArrival is the latest delivery or (re)start of the subscriber,
	// whichever is later: idleness counts only time spent listening
	// (stateLocked), so a split withholding deliveries, or stopped at the
	// budget, during a long downstream stall does not make a bounded read
	// look idle.
	lastArrival time.Time
	// lags are the lags (arrival minus event time) of recent arrivals,
	// lastListening the last arrival or bundle end that found the split
	// listening, lastDeaf the last bundle end that found it not listening,
	// and watermark the split's own estimate at its latest bundle
	// (watermark.go).
	lags          arrivalLags
	lastListening time.Time
	lastDeaf      time.Time
	watermark     time.Time
	// created is when the split first ran in this process, and skipped why
	// the read's watermark last left it out (watermark.go).
	created time.Time
	skipped holdSkip
	// The stream's outage (health.go): the start of the one counted, whether
	// WatermarkMaxOutage released it, and the describe probe.
	outage         time.Time
	outageReleased bool
	probing        bool
	lastProbe      time.Time
	failure        error
	started        bool
	released       bool
	// waiting counts deliveries waiting for room in the budget.
	waiting int
	// budgetWait is budgetWaitFor(cfg); tests change it.
	budgetWait time.Duration
	// gate decides when what the split emitted is acked (internal/commit),
	// and gateAcks counts the acks it clears.
	gate     commit.Gate
	gateAcks counter
	// backlog is the split's watch of its subscription's backlog samples,
	// nil when the read does not sample (backlog.go); set by the registry.
	backlog *backlogWatch
}

// receiveRun is one Receive call; a reader restarts with a new one.
type receiveRun struct {
	ctx      context.Context // done once the run is stopped
	cancel   context.CancelFunc
	done     chan struct{}
	stopping bool
}

func newSplitReader(split Split, cfg Config, rs *readState, now func() time.Time, dial func(context.Context) (puller, error)) *splitReader {
	t := now()
	r := &splitReader{
		split: split, cfg: cfg, budget: rs.budget, stats: rs.stats, now: now, dial: dial,
		ledger:     newLedger(rs.budget, rs.stats, rs.givenBack, now),
		lastPolled: t, lastArrival: t, lastListening: t, created: t,
		lags:       arrivalLags{window: cfg.WatermarkWindow},
		budgetWait: budgetWaitFor(cfg),
	}
	r.gate, r.gateAcks = commit.Resume{}, acksResume
	if cfg.Commit == CommitFlinkCheckpoint {
		r.gate, r.gateAcks = commit.NewCheckpoint(cfg.Flink.REST, cfg.Flink.Job, cfg.Flink.Patience, r.settleCommitted), acksCheckpoint
	}
	return r
}

// startLocked starts the split's subscriber if it is not running, and
// reports a failure the subscriber stopped with.
func (r *splitReader) startLocked(ctx context.Context) error {
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
	if r.conn == nil {
		conn, err := r.dial(ctx)
		if err != nil {
			return err
		}
		r.conn = conn
	}
	if r.started {
		r.stats.add(subscriberRestarts, 1)
	}
	r.started = true
	r.lastArrival = r.now()
	runCtx, cancel := context.WithCancel(context.Background())
	run := &receiveRun{ctx: runCtx, cancel: cancel, done: make(chan struct{})}
	r.running = run
	go r.receive(runCtx, run, r.conn)
	return nil
}

func (r *splitReader) receive(ctx context.Context, run *receiveRun, conn puller) {
	err := conn.receive(ctx, func(m *pubsub.Message) bool {
		d := fromClient(m, r.split.Subscription, &r.cfg)
		d.exactlyOnce, _ = conn.exactlyOnce()
		return r.deliver(run, d)
	})
	close(run.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == run {
		// Stopped by itself: the stream failed permanently. Nothing held is
		// valid any more; give it back so Pub/Sub redelivers it at once.
		r.running = nil
		nacks := r.ledger.giveBackAll(nackedShutdown)
		if err == nil {
			err = fmt.Errorf("the subscriber stopped without an error")
		}
		r.failure = describeReceiveError(r.split.Subscription, err)
		go r.sendByRPC(conn, r.ledger.takeRecentAcks(r.now()), nacks)
		return
	}
	if err != nil && run.stopping {
		r.stats.add(failuresAbsorbed, 1)
		log.Warnf(context.Background(), "pubsubio.Read: the subscriber of %s failed while stopping (absorbed: its messages were already given back): %v", r.split.Subscription, err)
	}
}

// describeReceiveError says what to do about a stream that failed.
func describeReceiveError(sub model.Subscription, err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("pubsubio.Read: subscription %s does not exist: create it or fix Subscriptions: %w", sub, err)
	case codes.PermissionDenied:
		return fmt.Errorf("pubsubio.Read: permission denied reading %s: the workers' identity needs pubsub.subscriptions.consume on it (roles/pubsub.subscriber): %w", sub, err)
	}
	return fmt.Errorf("pubsubio.Read: reading %s failed: %w", sub, err)
}

// confirmSubscription describes the split's subscription and says what
// to do if that fails.
func (r *splitReader) confirmSubscription(ctx context.Context) error {
	if err := r.withConn(ctx, func(conn puller) error { return conn.describe(ctx) }); err != nil {
		return describeReceiveError(r.split.Subscription, err)
	}
	return nil
}

// stopLocked gives everything held back and stops the subscriber, which
// the next bundle restarts.
func (r *splitReader) stopLocked(reason counter) {
	nacks := r.ledger.giveBackAll(reason)
	run := r.running
	if run == nil {
		return
	}
	r.running = nil
	r.stopping = run
	run.stopping = true
	run.cancel()
	acks, conn := r.ledger.takeRecentAcks(r.now()), r.conn
	go func() {
		r.awaitStop(run)
		r.sendByRPC(conn, acks, nacks)
		r.mu.Lock()
		if r.stopping == run {
			r.stopping = nil // abandoned after ShutdownTimeout: a new run may start anyway
		}
		r.mu.Unlock()
	}()
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
		log.Warnf(context.Background(), "pubsubio.Read: the subscriber of %s did not stop within ShutdownTimeout %v; abandoned (its messages wait out their ack deadline)", r.split.Subscription, r.cfg.ShutdownTimeout)
		return false
	}
}

// release stops the split for good: everything held goes back to Pub/Sub,
// and the connection is closed once its subscriber ended.
func (r *splitReader) release(reason counter) {
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return
	}
	r.released = true
	nacks := r.ledger.giveBackAll(reason)
	run := r.running
	r.running = nil
	if run != nil {
		run.stopping = true
		run.cancel()
	}
	conn := r.conn
	r.conn = nil
	acks := r.ledger.takeRecentAcks(r.now())
	r.gate.Release()
	if r.backlog != nil {
		r.backlog.release()
	}
	r.mu.Unlock()
	stopped := run == nil || r.awaitStop(run)
	r.sendByRPC(conn, acks, nacks)
	if !stopped {
		go func() { <-run.done; closeQuietly(conn) }()
		return
	}
	closeQuietly(conn)
}

func closeQuietly(conn puller) {
	if conn != nil {
		_ = conn.close()
	}
}

// touch marks the split as in use; the registry calls it under its lock so
// the janitor cannot release a split between lookup and bundle.
func (r *splitReader) touch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastPolled = r.now()
}

// idleSince reports whether the split has not been polled since t and
// runs no bundle.
func (r *splitReader) idleSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.inBundle && r.lastPolled.Before(t)
}

// holdLocked is what the split holds the read's watermark in this process
// at (registry.watermark): its own estimate, zero while it has none. Without
// an estimate WatermarkIdle after it started, or not polled for
// WatermarkIdle, it holds only at the oldest message it holds unemitted (ok
// false for none), and that is counted once per spell. A split whose stream
// fails keeps holding for up to WatermarkMaxOutage (health.go).
func (r *splitReader) holdLocked(now time.Time) (t time.Time, ok bool) {
	skip := notSkipped
	switch {
	case now.Sub(r.lastPolled) >= r.cfg.WatermarkIdle:
		skip = stale
	case r.watermark.IsZero() && now.Sub(r.created) >= r.cfg.WatermarkIdle && r.outage.IsZero():
		skip = unestimated
	}
	if skip != r.skipped {
		switch skip {
		case unestimated:
			r.stats.add(watermarkSkippedUnestimated, 1)
		case stale:
			r.stats.add(watermarkSkippedStale, 1)
		}
		r.skipped = skip
	}
	if skip == notSkipped {
		return r.watermark, true
	}
	oldest := r.ledger.oldestBuffered()
	return oldest, !oldest.IsZero()
}
