package source

import "sync"

// budget is the hard bound on messages received but not yet emitted, shared
// by every split of one read in one worker process. The client's flow
// control stops covering these once their leases lapse or their split is no
// longer polled, so without it a stalled pipeline buffers without bound.
type budget struct {
	maxMessages int
	maxBytes    int64

	mu       sync.Mutex
	messages int
	bytes    int64
}

func newBudget(maxMessages int, maxBytes int64) *budget {
	return &budget{maxMessages: maxMessages, maxBytes: maxBytes}
}

// reserve takes room for one message of size bytes, or reports that it
// would cross the budget. A message larger than the byte budget is admitted
// when nothing is buffered, so one huge message cannot wedge a split.
func (b *budget) reserve(size int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.messages+1 > b.maxMessages {
		return false
	}
	if b.bytes+size > b.maxBytes && b.messages > 0 {
		return false
	}
	b.messages++
	b.bytes += size
	return true
}

// release returns the room of messages totalling bytes.
func (b *budget) release(messages int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.messages -= messages
	b.bytes -= bytes
}

// usage returns what is buffered now.
func (b *budget) usage() (messages int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.messages, b.bytes
}
