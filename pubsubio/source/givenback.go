package source

import (
	"container/heap"
	"sync"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// maxGivenBack bounds how many given-back messages a read remembers; past
// it, further ones do not hold the watermark (about 100 bytes each) and
// count in given_back_untracked.
const maxGivenBack = 100_000

// givenBack remembers, for one read in one process, the messages the read
// gave back to Pub/Sub (a failed bundle, a stopped subscriber, a released
// split) and has not received again, with their event times: Pub/Sub
// redelivers them with their original publish time, so the watermark must
// not pass them (watermark.go). Each is remembered for at most hold: one
// that another consumer took, or that Pub/Sub keeps back longer, stops
// holding the watermark then, and counts in given_back_unseen: most likely
// Pub/Sub redelivered it to another worker, where nothing holds the
// watermark for it. Safe for concurrent use.
type givenBack struct {
	hold  time.Duration
	stats *stats

	mu      sync.Mutex
	entries map[string]givenBackEntry // by message ID: the latest give-back
	order   eventTimeHeap
	seq     int64
}

type givenBackEntry struct {
	sub       model.Subscription
	eventTime time.Time
	at        time.Time // when it was given back
	seq       int64
}

func newGivenBack(hold time.Duration, s *stats) *givenBack {
	return &givenBack{hold: hold, stats: s, entries: map[string]givenBackEntry{}}
}

// add remembers that message id of sub, of eventTime, was given back at
// now.
func (g *givenBack) add(id string, sub model.Subscription, eventTime, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.entries[id]; !ok && len(g.entries) >= maxGivenBack {
		g.stats.add(givenBackUntracked, 1)
		return
	}
	g.seq++
	e := givenBackEntry{sub: sub, eventTime: eventTime, at: now, seq: g.seq}
	g.entries[id] = e
	heap.Push(&g.order, heapItem{id: id, givenBackEntry: e})
	if len(g.order) > 2*maxGivenBack {
		g.compact()
	}
}

// compact rebuilds the heap from the entries: items of messages seen again
// leave the heap only when they reach its top.
func (g *givenBack) compact() {
	g.order = g.order[:0]
	for id, e := range g.entries {
		g.order = append(g.order, heapItem{id: id, givenBackEntry: e})
	}
	heap.Init(&g.order)
}

// seen forgets message id: it arrived again.
func (g *givenBack) seen(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.entries, id)
}

// has reports whether message id was given back and not seen again since.
func (g *givenBack) has(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.entries[id]
	return ok
}

// awaits reports whether a message of sub was given back after since and
// not seen again: Pub/Sub redelivers it to a split still reading sub, most
// likely one in this process.
func (g *givenBack) awaits(sub model.Subscription, since time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.entries {
		if e.sub == sub && e.at.After(since) {
			return true
		}
	}
	return false
}

// oldest returns the oldest event time of what is given back and neither
// seen again nor expired at now; zero if none.
func (g *givenBack) oldest(now time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.order.Len() > 0 {
		top := g.order[0]
		e, ok := g.entries[top.id]
		switch {
		case !ok || e.seq != top.seq:
			heap.Pop(&g.order) // seen again, or given back again since
		case now.Sub(e.at) >= g.hold:
			heap.Pop(&g.order)
			delete(g.entries, top.id)
			g.stats.add(givenBackUnseen, 1)
		default:
			return e.eventTime
		}
	}
	return time.Time{}
}

type heapItem struct {
	id string
	givenBackEntry
}

// eventTimeHeap orders given-back messages by event time, oldest first.
type eventTimeHeap []heapItem

func (h eventTimeHeap) Len() int           { return len(h) }
func (h eventTimeHeap) Less(i, j int) bool { return h[i].eventTime.Before(h[j].eventTime) }
func (h eventTimeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventTimeHeap) Push(x any)        { *h = append(*h, x.(heapItem)) }
func (h *eventTimeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
