package sink

import (
	"cmp"
	"context"
	"slices"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Destinations beyond MaxActivePublishers are published in groups. A
// message to a destination with no publisher while the cache is full does
// not evict one: eviction stops the victim, which sends what it batches
// at once, so with more destinations than publishers every message would
// leave in a request of its own. It waits in its destination's group
// instead, and the group is published through a publisher obtained for
// it, one eviction per group, when it fills a batch (Publisher
// CountThreshold or ByteThreshold), at MaxGroupedMessages or
// MaxInFlightBytes (admission.go), and at the end of the bundle. Until then
// every later message to the destination joins the group, so each ordering
// key keeps its publish order. Grouped messages count against
// MaxGroupedMessages and MaxInFlightBytes, which bound what the groups
// hold, not against MaxInFlightMessages.

// group is the messages waiting for a publisher of their destination, in
// publish order.
type group struct {
	topic model.Topic
	msgs  []*outbound
	bytes int64
}

// dispatch hands o, an admitted message, to topic's publisher, or to
// topic's group when topic has one or has no publisher while
// MaxActivePublishers are open. A group that fills a batch is published.
func (w *writer) dispatch(ctx context.Context, topic model.Topic, o *outbound) error {
	g := w.groups[topic]
	if g == nil {
		if _, ok := w.dests[topic]; ok || len(w.dests) < w.cfg.MaxActivePublishers {
			d, err := w.destination(ctx, topic)
			if err != nil {
				return err
			}
			w.send(d, o, false)
			return nil
		}
		if err := w.checkTopic(topic); err != nil {
			return err
		}
		g = &group{topic: topic}
		w.groups[topic] = g
	}
	g.msgs = append(g.msgs, o)
	g.bytes += o.size
	w.groupedMsgs++
	w.groupedBytes += o.size
	if len(g.msgs) >= w.cfg.Publisher.CountThreshold || g.bytes >= int64(w.cfg.Publisher.ByteThreshold) {
		return w.publishGroup(ctx, g)
	}
	return nil
}

// publishGroups publishes every group, the longest waiting first.
func (w *writer) publishGroups(ctx context.Context) error {
	if len(w.groups) == 0 {
		return w.failure
	}
	gs := make([]*group, 0, len(w.groups))
	for _, g := range w.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *group) int { return cmp.Compare(a.msgs[0].seq, b.msgs[0].seq) })
	for _, g := range gs {
		if err := w.publishGroup(ctx, g); err != nil {
			return err
		}
	}
	return w.failure
}

// publishGroup sends g's messages, in publish order, through a publisher
// of its destination, making room for one (publishercache.go), and
// flushes it: nothing else is batching for the destination.
func (w *writer) publishGroup(ctx context.Context, g *group) error {
	d, err := w.destination(ctx, g.topic)
	if err != nil {
		return err
	}
	delete(w.groups, g.topic)
	w.groupedMsgs -= len(g.msgs)
	w.groupedBytes -= g.bytes
	for _, o := range g.msgs {
		w.send(d, o, false)
	}
	d.flush()
	return nil
}

// accepted is what the writer holds: the messages sent and not yet
// resolved and those waiting in groups, and their size.
func (w *writer) accepted() (msgs int, bytes int64) {
	return w.inflightMsgs + w.groupedMsgs, w.inflightBytes + w.groupedBytes
}
