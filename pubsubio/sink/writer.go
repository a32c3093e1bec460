package sink

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// writer is the runtime state of one writeFn instance. Every method runs on
// the DoFn's goroutine, one bundle at a time; the only state other
// goroutines touch is the completion queue (completions.go) and a
// destination's flush bookkeeping (flushAsync).
type writer struct {
	cfg Config
	be  backend

	// Replaceable in tests.
	now   func() time.Time
	rand  func() float64
	warnf func(ctx context.Context, format string, args ...any)
	infof func(ctx context.Context, format string, args ...any)

	dests map[model.Topic]*dest
	lru   *list.List // of *dest, most recently used at the front

	seq   uint64 // publish order, per writer; republishes keep theirs
	epoch uint64 // bundles since the last failure; older verdicts are ignored

	inflightMsgs  int   // accepted, not yet resolved (this epoch)
	inflightBytes int64 // their serialized size

	done completions

	err    error // the first failure of this bundle: returned by every call until reset
	failed bool  // a call returned an error: the next bundle starts afresh

	rejections    int   // consecutive rejections (routed messages) with no success between
	lastRejection error // the latest of them
	roots         rootRing

	// The current DoFn call's context and dead-letter emitter.
	ctx  context.Context
	emit func(dlq.FailedMessage)

	stats stats
}

// dest is one destination topic and its publisher.
type dest struct {
	topic    model.Topic
	pub      publisher
	elem     *list.Element
	lastUsed time.Time

	inflight int        // this epoch's unresolved publishes to the topic
	parked   []*pending // failed publishes waiting for repair
	notFound bool       // a parked publish saw NOT_FOUND: the repair creates the topic
	lastErr  error      // the latest root failure of a parked publish
	// paused holds ordering keys the client paused after a message the
	// failure policy routed: nothing of the key is parked behind it, so the
	// next repair or drain resumes it.
	paused map[string]bool

	flushMu      sync.Mutex
	flushRunning bool
	flushAgain   bool
	flushes      sync.WaitGroup // the running flush goroutine; release waits for it
}

// clean reports whether d holds nothing: releasing it can lose nothing.
func (d *dest) clean() bool {
	return d.inflight == 0 && len(d.parked) == 0 && len(d.paused) == 0
}

// pending is one accepted message, from admission to its verdict.
type pending struct {
	seq      uint64
	epoch    uint64
	dest     *dest
	msg      model.Message // as the pipeline gave it, for dead letters
	size     int64         // serialized, as the client counts it
	attempts int
	// isolate: the message was in a batch Pub/Sub rejected as a whole, so it
	// is republished alone until it earns a verdict of its own.
	isolate bool
	solo    bool // this attempt was published alone

	res result
	err error // set by the completion goroutine before it queues p
}

func newWriter(cfg Config, be backend) *writer {
	return &writer{
		cfg:   cfg,
		be:    be,
		now:   time.Now,
		rand:  rand.Float64,
		warnf: log.Warnf,
		infof: log.Infof,
		dests: map[model.Topic]*dest{},
		lru:   list.New(),
		done:  newCompletions(),
		ctx:   context.Background(),
		emit:  func(dlq.FailedMessage) {},
	}
}

// startBundle begins a bundle. After a failed one, whatever that bundle
// left (in-flight verdicts, parked messages, the captured error) belongs to
// elements the runner will retry, so it is set aside: late verdicts of the
// old epoch are ignored rather than routed or failing this bundle.
func (w *writer) startBundle() {
	if !w.failed {
		return
	}
	w.epoch++
	w.inflightMsgs, w.inflightBytes = 0, 0
	for _, d := range w.dests {
		d.inflight = 0
		d.parked = nil
		d.notFound = false
		d.lastErr = nil
		w.resumePaused(d)
	}
	w.err, w.failed = nil, false
	w.rejections, w.lastRejection = 0, nil
}

// process publishes one message: it returns once the message is accepted by
// a publisher (or routed by the failure policy), blocking at the in-flight
// caps and while repairs run.
func (w *writer) process(ctx context.Context, m model.Message, emit func(dlq.FailedMessage)) error {
	w.ctx, w.emit = ctx, emit
	err := w.processOne(ctx, m)
	w.stats.maybeFlush(ctx, w)
	return w.returned(err)
}

func (w *writer) processOne(ctx context.Context, m model.Message) error {
	w.poll()
	if w.err != nil {
		return w.err
	}
	if err := w.repairAll(ctx); err != nil {
		return err
	}
	topic := m.Topic
	if topic.IsZero() {
		topic = w.cfg.Topic
	}
	if topic.IsZero() {
		return w.setErr(errors.New("pubsubio.Write: a message has no Topic and WriteConfig.Topic is unset; set a default Topic or set Message.Topic on every message"))
	}
	if m.OrderingKey != "" && !w.cfg.Publisher.EnableMessageOrdering {
		return w.setErr(fmt.Errorf("pubsubio.Write: a message to %s has ordering key %q but Publisher.EnableMessageOrdering is false; enable it or clear Message.OrderingKey", topic, m.OrderingKey))
	}
	size := messageSize(m)
	if err := checkLimits(topic, m, size); err != nil {
		w.route(ctx, topic, m, dlq.StageValidate, err, 0)
		return w.err
	}
	d, err := w.destination(ctx, topic)
	if err != nil {
		return err
	}
	if err := w.admit(ctx, int64(size)); err != nil {
		return err
	}
	w.seq++
	w.send(d, &pending{seq: w.seq, msg: m, size: int64(size)}, false)
	return nil
}

// finishBundle returns once every message the bundle accepted is confirmed
// by Pub/Sub or routed by the failure policy, and then releases idle
// publishers.
func (w *writer) finishBundle(ctx context.Context, emit func(dlq.FailedMessage)) error {
	w.ctx, w.emit = ctx, emit
	err := w.settle(ctx, "flushing at the end of the bundle")
	if err == nil {
		w.evictIdle(ctx)
	}
	w.stats.flush(ctx, w)
	return w.returned(err)
}

// close releases every publisher and the connection (Teardown).
func (w *writer) close(ctx context.Context) error {
	return w.shutdown(ctx, "teardown")
}

// shutdown releases every publisher and the connection; why names the
// occasion in the log.
func (w *writer) shutdown(ctx context.Context, why string) error {
	var all []*dest
	for _, d := range w.dests {
		all = append(all, d)
	}
	w.release(ctx, all, why)
	return w.be.close()
}

// send hands p to its destination's publisher. alone marks a publish the
// caller will flush and wait for before sending anything else to d.
func (w *writer) send(d *dest, p *pending, alone bool) {
	p.epoch, p.dest, p.solo = w.epoch, d, alone
	p.attempts++
	// A fresh client message per attempt: the client owns what it is given
	// (with tracing on it adds attributes), and m is what dead letters show.
	p.res = d.pub.publish(&pubsub.Message{Data: p.msg.Data, Attributes: p.msg.Attributes, OrderingKey: p.msg.OrderingKey})
	p.err = nil
	d.inflight++
	w.inflightMsgs++
	w.inflightBytes += p.size
	w.done.watch(p)
}

// setErr records err as the bundle's failure unless one is recorded, and
// returns the recorded one.
func (w *writer) setErr(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// returned marks the writer failed when a DoFn call returns an error.
func (w *writer) returned(err error) error {
	if err != nil {
		w.failed = true
	}
	return err
}

// resumePaused resumes the ordering keys of d that a routed message paused.
// Only call it when nothing of d is in flight, or a resumed key could let a
// later message overtake one the client is about to cancel.
func (w *writer) resumePaused(d *dest) {
	for k := range d.paused {
		d.pub.resume(k)
	}
	clear(d.paused)
}
