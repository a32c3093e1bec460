package typed

import (
	"container/list"
	"context"
	"reflect"
	"sync"
)

// MaxCachedRevisions bounds the Avro schema revisions a process keeps,
// with the plan of each for an element type. Pub/Sub keeps at most 20
// revisions per schema, so this holds every revision of a dozen schemas;
// past it the least recently used is fetched again when a message names
// it.
const MaxCachedRevisions = 256

// revisionKey is one revision, read into one element type, from one
// endpoint.
type revisionKey struct {
	endpoint string
	revision string // "projects/P/schemas/S@REVISION"
	t        reflect.Type
}

// revisionEntry is a revision fetched, or being fetched: ready is closed
// once codec or err is set.
type revisionEntry struct {
	ready chan struct{}
	codec *avroCodec
	// err is why messages naming the revision cannot be decoded (it does
	// not exist, is not Avro, does not fit the element type); or, when
	// transient is set, why it could not be fetched this time.
	err       error
	transient bool
	elem      *list.Element
}

// revisionCache holds revisions process-wide, so that each is fetched
// once per process, however many DoFn instances read it. Concurrent
// misses for one revision share one fetch.
type revisionCache struct {
	mu      sync.Mutex
	max     int
	entries map[revisionKey]*revisionEntry
	lru     list.List // of revisionKey, most recently used first
}

var revisions = &revisionCache{max: MaxCachedRevisions}

// fetchFunc fetches a revision: its codec, or why not, and whether that
// may change on a later try (an outage: not cached).
type fetchFunc func(ctx context.Context) (c *avroCodec, transient bool, err error)

// get returns the codec of k, fetching it on a miss. A fetch's lasting
// error is cached like a codec; a transient one is returned to everyone
// who waited for that fetch and forgotten.
func (c *revisionCache) get(ctx context.Context, k revisionKey, fetch fetchFunc) (codec *avroCodec, transient bool, err error) {
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok {
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		select {
		case <-e.ready:
			return e.codec, e.transient, e.err
		case <-ctx.Done():
			return nil, true, ctx.Err()
		}
	}
	if c.entries == nil {
		c.entries = map[revisionKey]*revisionEntry{}
	}
	e = &revisionEntry{ready: make(chan struct{})}
	e.elem = c.lru.PushFront(k)
	c.entries[k] = e
	for c.lru.Len() > c.max {
		oldest := c.lru.Back()
		delete(c.entries, c.lru.Remove(oldest).(revisionKey))
	}
	c.mu.Unlock()

	e.codec, e.transient, e.err = fetch(ctx)
	if e.transient {
		c.mu.Lock()
		if c.entries[k] == e {
			c.lru.Remove(e.elem)
			delete(c.entries, k)
		}
		c.mu.Unlock()
	}
	close(e.ready)
	return e.codec, e.transient, e.err
}
