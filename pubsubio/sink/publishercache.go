package sink

import (
	"context"
	"fmt"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/publishing"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Publishers are created lazily per destination and owned by the writer,
// in an LRU bounded by MaxActivePublishers. Writer ownership (rather than a
// process-wide cache) gives each publisher a deterministic end: eviction or
// Teardown, never a job's leftovers in a shared worker. Eviction happens
// once per group of messages (grouping.go), never once per message.

// destination returns the publisher for topic, creating it (and making room
// for it) when needed.
func (w *writer) destination(ctx context.Context, topic model.Topic) (*dest, error) {
	if d, ok := w.dests[topic]; ok {
		w.lru.MoveToFront(d.elem)
		d.lastUsed = w.now()
		return d, nil
	}
	if err := w.checkTopic(topic); err != nil {
		return nil, err
	}
	if len(w.dests) >= w.cfg.MaxActivePublishers {
		if err := w.makeRoom(ctx); err != nil {
			return nil, err
		}
	}
	d := &dest{topic: topic, pub: w.be.publisher(topic), lastUsed: w.now(), paused: map[string]bool{}}
	d.elem = w.lru.PushFront(d)
	w.dests[topic] = d
	return d, nil
}

// checkTopic fails the bundle when topic, a destination new to the cache,
// is malformed: a routing bug that fails every message alike, not a bad
// record, so no failure policy applies.
func (w *writer) checkTopic(topic model.Topic) error {
	if err := topic.Validate(); err != nil {
		return w.fail(fmt.Errorf("pubsubio.Write: a message's destination %q is not a valid topic: %w; fix Message.Topic", topic.String(), err))
	}
	return nil
}

// makeRoom releases one publisher for a new destination at the cap: the
// least recently used one holding nothing, or, when every one holds
// something, the least recently used after draining everything. It never
// drops an in-flight message, a parked retry or a paused key.
//
// The new publisher is opened only after the old one stopped. If the stop
// overruns ShutdownTimeout the bundle fails instead: destination churn
// would otherwise pile abandoned publishers (goroutines, batches) up behind
// a cap meant to bound them.
func (w *writer) makeRoom(ctx context.Context) error {
	victim := w.leastRecentClean()
	if victim == nil {
		if err := w.drainAll(ctx, fmt.Sprintf("draining every publisher to make room under MaxActivePublishers %d", w.cfg.MaxActivePublishers)); err != nil {
			return err
		}
		victim = w.leastRecentClean()
	}
	if abandoned := w.release(ctx, []*dest{victim}, "capacity eviction"); len(abandoned) > 0 {
		return w.fail(fmt.Errorf("pubsubio.Write: the publisher of %s, released to make room under MaxActivePublishers %d, did not stop within ShutdownTimeout %v: raise ShutdownTimeout or MaxActivePublishers",
			victim.topic, w.cfg.MaxActivePublishers, w.cfg.ShutdownTimeout))
	}
	return nil
}

// leastRecentClean returns the least recently used publisher holding
// nothing, or nil.
func (w *writer) leastRecentClean() *dest {
	for e := w.lru.Back(); e != nil; e = e.Prev() {
		if d := e.Value.(*dest); d.clean() {
			return d
		}
	}
	return nil
}

// evictIdle releases the publishers unused for longer than
// DestinationIdleTimeout. It runs only after FinishBundle drained
// everything, so they are clean; an overrunning stop is logged and counted
// but fails nothing, because every message of the bundle is already
// confirmed and failing it now would only publish them again.
func (w *writer) evictIdle(ctx context.Context) {
	now := w.now()
	var idle []*dest
	for e := w.lru.Back(); e != nil; e = e.Prev() {
		d := e.Value.(*dest)
		if now.Sub(d.lastUsed) <= w.cfg.DestinationIdleTimeout {
			break // the rest were used more recently
		}
		if d.clean() {
			idle = append(idle, d)
		}
	}
	w.release(ctx, idle, "idle eviction")
}

// release removes ds from the cache and stops their publishers against one
// ShutdownTimeout (publishing.StopAll), returning the topics whose
// publisher did not stop in time. An abandoned stop keeps running in the
// background; it is logged with its topic and counted
// (publisher_shutdowns_abandoned).
func (w *writer) release(ctx context.Context, ds []*dest, why string) []model.Topic {
	if len(ds) == 0 {
		return nil
	}
	stops := make([]func(), len(ds))
	for i, d := range ds {
		w.lru.Remove(d.elem)
		delete(w.dests, d.topic)
		stops[i] = func() {
			d.flusher.Wait() // the client's Flush and Stop must not overlap
			d.pub.stop()
		}
	}
	var abandoned []model.Topic
	for _, i := range publishing.StopAll(w.cfg.ShutdownTimeout, stops...) {
		t := ds[i].topic
		abandoned = append(abandoned, t)
		shutdownsAbandoned.Add(1)
		w.warnf(ctx, "pubsubio.Write: the publisher of %s did not stop within ShutdownTimeout %v (%s); abandoned (it retries until Publisher.Timeout %v)",
			t, w.cfg.ShutdownTimeout, why, w.cfg.Publisher.Timeout)
	}
	return abandoned
}

// flushAll asks every publisher with something in flight to send what it
// batches now.
func (w *writer) flushAll() {
	for e := w.lru.Front(); e != nil; e = e.Next() {
		if d := e.Value.(*dest); d.inflight > 0 {
			d.flush()
		}
	}
}

// anyParked reports whether some destination has messages to repair.
func (w *writer) anyParked() bool {
	for e := w.lru.Front(); e != nil; e = e.Next() {
		if len(e.Value.(*dest).parked) > 0 {
			return true
		}
	}
	return false
}
