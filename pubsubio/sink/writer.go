package sink

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/publishing"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/tracing"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// writer is the runtime state of one writeFn instance. Every method runs on
// the DoFn's goroutine, one bundle at a time; the only state other
// goroutines touch is the completion queue (completions.go) and a
// destination's flusher.
type writer struct {
	cfg Config
	be  backend

	// Replaceable in tests.
	now   func() time.Time
	rand  func() float64
	warnf func(ctx context.Context, format string, args ...any)
	infof func(ctx context.Context, format string, args ...any)

	dests  map[model.Topic]*dest
	lru    *list.List             // of *dest, most recently used at the front
	groups map[model.Topic]*group // destinations waiting for a publisher (grouping.go)

	seq   uint64 // publish order, per writer; republishes keep theirs
	epoch uint64 // bundles since the last failure; older verdicts are ignored

	inflightMsgs  int   // sent, not yet resolved (this epoch)
	inflightBytes int64 // their serialized size
	groupedMsgs   int   // accepted, waiting in groups
	groupedBytes  int64 // their serialized size

	done completions

	// failure is the bundle's failure: once set, every call of the bundle
	// returns it, and the next bundle starts afresh (startBundle).
	failure error

	rejections    int   // consecutive rejections (routed messages) with no success between
	lastRejection error // the latest of them
	roots         rootRing

	// deadLetters are what the failure policy routed since the DoFn last
	// took them (takeDeadLetters), to emit.
	deadLetters []deadLetter

	stats stats
}

// dest is one destination topic and its publisher.
type dest struct {
	topic    model.Topic
	pub      publisher
	flusher  publishing.Flusher
	elem     *list.Element
	lastUsed time.Time

	inflight int         // this epoch's unresolved publishes to the topic
	parked   []*outbound // failed publishes waiting for repair
	notFound bool        // a parked publish saw NOT_FOUND: the repair creates the topic
	lastErr  error       // the latest root failure of a parked publish
	// paused holds ordering keys the client paused after a message the
	// failure policy routed: nothing of the key is parked behind it, so the
	// next repair or drain resumes it.
	paused map[string]bool
}

// clean reports whether d holds nothing: releasing it can lose nothing.
func (d *dest) clean() bool {
	return d.inflight == 0 && len(d.parked) == 0 && len(d.paused) == 0
}

// flush sends what d's publisher batches, without blocking.
func (d *dest) flush() { d.flusher.Flush(d.pub.flush) }

// deadLetter is a routed message and the event time it is emitted at: the
// failed message's own.
type deadLetter struct {
	eventTime time.Time
	failed    dlq.FailedMessage
}

// outbound is one accepted message, from admission to its verdict.
type outbound struct {
	seq       uint64
	epoch     uint64
	dest      *dest
	msg       model.Message // as published (Config.stamped), for dead letters
	eventTime time.Time     // the element's, for its dead letter
	size      int64         // serialized, as the client counts it
	attempts  int
	// isolate: the message was in a batch Pub/Sub rejected as a whole, so it
	// is republished alone until it earns a verdict of its own.
	isolate bool
	solo    bool // this attempt was published alone

	res result
	err error // set by the completion goroutine before it queues o

	span trace.Span // its publish span, under Config.Tracing (trace.go)
}

func newWriter(cfg Config, be backend) *writer {
	return &writer{
		cfg:    cfg,
		be:     be,
		now:    time.Now,
		rand:   rand.Float64,
		warnf:  log.Warnf,
		infof:  log.Infof,
		dests:  map[model.Topic]*dest{},
		lru:    list.New(),
		groups: map[model.Topic]*group{},
		done:   newCompletions(),
		stats:  newStats(),
	}
}

// startBundle begins a bundle. After a failed one, whatever that bundle
// left (in-flight verdicts, parked and grouped messages, the failure)
// belongs to elements the runner will retry, so it is set aside: late
// verdicts of the old epoch are ignored rather than routed or failing this
// bundle.
func (w *writer) startBundle() {
	if w.failure == nil {
		return
	}
	w.epoch++
	w.inflightMsgs, w.inflightBytes = 0, 0
	for _, g := range w.groups {
		endTraces(g.msgs)
	}
	clear(w.groups)
	w.groupedMsgs, w.groupedBytes = 0, 0
	for _, d := range w.dests {
		endTraces(d.parked)
		d.inflight = 0
		d.parked = nil
		d.notFound = false
		d.lastErr = nil
		w.resumePaused(d)
	}
	w.failure = nil
	w.rejections, w.lastRejection = 0, nil
	w.deadLetters = w.deadLetters[:0]
}

// process publishes one message: it returns once the message is accepted by
// a publisher (or routed by the failure policy), blocking at the in-flight
// caps and while repairs run.
func (w *writer) process(ctx context.Context, eventTime time.Time, m model.Message) error {
	err := w.processOne(ctx, eventTime, m)
	if w.stats.throttle.Due(w.now()) {
		w.stats.report(ctx, w)
	}
	return err
}

func (w *writer) processOne(ctx context.Context, eventTime time.Time, m model.Message) error {
	w.poll(ctx)
	if w.failure != nil {
		return w.failure
	}
	if err := w.repairAll(ctx); err != nil {
		return err
	}
	m = w.cfg.stamped(m, eventTime)
	topic := m.Topic
	if topic.IsZero() {
		topic = w.cfg.Topic
	}
	if topic.IsZero() {
		return w.fail(errors.New("pubsubio.Write: a message has no Topic and WriteConfig.Topic is unset; set one of them"))
	}
	if m.OrderingKey != "" && !w.cfg.Publisher.EnableMessageOrdering {
		return w.fail(fmt.Errorf("pubsubio.Write: a message to %s has ordering key %q but Publisher.EnableMessageOrdering is false; enable it or clear Message.OrderingKey",
			topic, text.Truncate(m.OrderingKey, maxQuoted)))
	}
	var span trace.Span
	if w.cfg.Tracing && (len(m.Data) > 0 || len(m.Attributes) > 0) {
		// An empty message carries no trace to continue, and must stay
		// empty for checkLimits to refuse it.
		m, span = tracing.StartPublish(m, topic)
	}
	size := messageSize(m)
	if err := checkLimits(topic, m, size); err != nil {
		tracing.End(span, err)
		w.route(ctx, routed{topic: topic, msg: m, eventTime: eventTime, stage: dlq.StageValidate}, err)
		return w.failure
	}
	if err := w.admit(ctx, int64(size)); err != nil {
		tracing.End(span, err)
		return err
	}
	w.seq++
	return w.dispatch(ctx, topic, &outbound{seq: w.seq, msg: m, eventTime: eventTime, size: int64(size), span: span})
}

// finishBundle publishes every group, returns once every message the
// bundle accepted is confirmed by Pub/Sub or routed by the failure policy,
// and then releases idle publishers.
func (w *writer) finishBundle(ctx context.Context) error {
	err := w.publishGroups(ctx)
	if err == nil {
		err = w.drainAll(ctx, "flushing at the end of the bundle")
	}
	if err == nil {
		w.evictIdle(ctx)
	}
	w.stats.report(ctx, w)
	return err
}

// takeDeadLetters returns what the failure policy routed since the last
// call, for the DoFn to emit. The slice is valid until the next call of the
// writer.
func (w *writer) takeDeadLetters() []deadLetter {
	out := w.deadLetters
	w.deadLetters = w.deadLetters[:0]
	return out
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

// send hands o to its destination's publisher. alone marks a publish the
// caller will flush and wait for before sending anything else to d.
func (w *writer) send(d *dest, o *outbound, alone bool) {
	o.epoch, o.dest, o.solo = w.epoch, d, alone
	o.attempts++
	// A fresh client message per attempt: the client owns what it is given
	// (with tracing on it adds attributes), and o.msg is what dead letters
	// show.
	o.res = d.pub.publish(&pubsub.Message{Data: o.msg.Data, Attributes: o.msg.Attributes, OrderingKey: o.msg.OrderingKey})
	o.err = nil
	d.inflight++
	w.inflightMsgs++
	w.inflightBytes += o.size
	w.done.watch(o)
}

// fail records err as the bundle's failure unless one is recorded, and
// returns the recorded one.
func (w *writer) fail(err error) error {
	if w.failure == nil {
		w.failure = err
	}
	return w.failure
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
