package source

import (
	"context"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// budget is the hard bound on messages received but not yet emitted, shared
// by every split of one read in one worker process. The client's flow
// control stops covering these once their leases lapse or their split is no
// longer polled, so without it a stalled pipeline buffers without bound.
// Deliveries that wait for room count against an allowance of the same
// size (reserveWithin), so a read holds at most twice its budget.
type budget struct {
	maxMessages int
	maxBytes    int64

	mu       sync.Mutex
	messages int
	bytes    int64
	room     chan struct{} // closed at the next free; nil while nobody waits
	// waitingMessages and waitingBytes are the deliveries waiting for room.
	waitingMessages int
	waitingBytes    int64
}

// budgetWait is how long a delivery waits for room when the budget is full
// before it is withheld (withheld.go). While it waits, the client's flow
// control holds back the split's streams (the client counts a message
// until its callback returns), so a pipeline that is only behind is paused
// instead of being made to give back everything and pull it again
// (BENCHMARKS.md, buffer budget). Far longer than a bundle round trip;
// short against the ack deadline the client keeps extending meanwhile.
// Without a client limit (MaxOutstandingMessages -1) there is no wait:
// what waits is capped at the budget's own size (reserveWithin), which
// would then be reached at once.
const budgetWait = 10 * time.Second

// budgetWaitFor is budgetWait where cfg's client flow control bounds what
// waits, else 0.
func budgetWaitFor(cfg Config) time.Duration {
	if !cfg.flowControlled() {
		return 0
	}
	return budgetWait
}

// flowControlled reports whether the client's flow control bounds what a
// stream is sent (MaxOutstandingMessages is not -1): only then can
// deliveries wait for room in the budget, and only then does it bound
// what is withheld.
func (cfg Config) flowControlled() bool { return cfg.MaxOutstandingMessages > 0 }

// flowControlFromBudget sets MaxOutstandingMessages and
// MaxOutstandingBytes, where zero, to each stream's share of the buffer
// budget, at most defaultWindow and the client's bytes: splits x
// ParallelPullCount streams, as if one worker ran every split (Prism does),
// are then never sent more than the budget holds. Flow control counts what
// a bundle emitted until it is acked as well, so it binds before the budget
// does.
func (cfg *Config) flowControlFromBudget() {
	if cfg.MaxOutstandingMessages == 0 {
		cfg.MaxOutstandingMessages = cfg.defaultWindow()
	}
	if cfg.MaxOutstandingBytes == 0 {
		cfg.MaxOutstandingBytes = cfg.defaultWindowBytes()
	}
}

// defaultWindowBytes is a stream's MaxOutstandingBytes when unset: its
// share of BufferMaxBytes, at most DefaultMaxOutstandingBytes.
func (cfg Config) defaultWindowBytes() int {
	return int(min(DefaultMaxOutstandingBytes, max(1, cfg.BufferMaxBytes/int64(cfg.streams()))))
}

// defaultWindow is a stream's MaxOutstandingMessages when unset: its share
// of the budget, at most DefaultMaxOutstandingMessages; under
// CommitFlinkCheckpoint the whole share, since a message waits there for a
// checkpoint (seconds) rather than for its bundle's commit.
func (cfg Config) defaultWindow() int {
	share := max(1, cfg.BufferMaxMessages/cfg.streams())
	if cfg.Commit == CommitFlinkCheckpoint {
		return share
	}
	return min(DefaultMaxOutstandingMessages, share)
}

// streams is how many streaming pulls a worker running every split opens.
func (cfg Config) streams() int {
	splits := len(cfg.Subscriptions)
	if cfg.Ordering != OrderingPerKey {
		splits = max(splits, cfg.Splits)
	}
	return max(1, splits*max(1, cfg.ParallelPullCount))
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
	return b.reserveLocked(size)
}

func (b *budget) reserveLocked(size int64) bool {
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

// reserveWithin is reserve waiting up to d for room, or until ctx is done.
// A waiting delivery is held in memory too, so what waits has an allowance
// of its own, the size of the budget: a delivery that would cross it does
// not wait. A read thus holds at most twice its budget.
func (b *budget) reserveWithin(ctx context.Context, size int64, d time.Duration) bool {
	b.mu.Lock()
	if b.reserveLocked(size) {
		b.mu.Unlock()
		return true
	}
	if d <= 0 || b.waitingMessages+1 > b.maxMessages || (b.waitingBytes+size > b.maxBytes && b.waitingMessages > 0) {
		b.mu.Unlock()
		return false
	}
	b.waitingMessages++
	b.waitingBytes += size
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.waitingMessages--
		b.waitingBytes -= size
		b.mu.Unlock()
	}()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		b.mu.Lock()
		if b.reserveLocked(size) {
			b.mu.Unlock()
			return true
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room := b.room
		b.mu.Unlock()
		select {
		case <-room:
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// free returns the room of messages totalling bytes and wakes whoever
// waits for room.
func (b *budget) free(messages int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.messages -= messages
	b.bytes -= bytes
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
}

// spare returns how much more fits beside what is buffered and what waits,
// and whether nothing is buffered.
func (b *budget) spare() (messages int, bytes int64, empty bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxMessages - b.messages - b.waitingMessages, b.maxBytes - b.bytes - b.waitingBytes, b.messages == 0
}

// usage returns what is buffered now.
func (b *budget) usage() (messages int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.messages, b.bytes
}

// mostSent is how many unacked messages a worker running all the read's
// splits may be sent under flow control, splits x ParallelPullCount x
// MaxOutstandingMessages, and the number of splits.
func (cfg Config) mostSent() (held int64, splits int) {
	splits = len(planSplits(cfg.Subscriptions, cfg.Ordering, cfg.Splits))
	return int64(splits) * int64(cfg.ParallelPullCount) * int64(cfg.MaxOutstandingMessages), splits
}

// streamsMayExceedBudget reports whether a worker running every split
// may be sent more messages than BufferMaxMessages under flow control.
func (cfg Config) streamsMayExceedBudget() bool {
	held, _ := cfg.mostSent()
	return cfg.flowControlled() && held > int64(cfg.BufferMaxMessages)
}

// budgetWarnings say when the budget is probably too small. Pub/Sub may
// send a worker that runs every split more messages than BufferMaxMessages:
// each of a split's ParallelPullCount streams may hold
// MaxOutstandingMessages unacked, and messages stay unacked until a commit.
// A split whose bundles fall behind then withholds deliveries for
// redelivery, where flow control would have paused it. Prism runs every
// split in one process; other runners spread them, so it is a warning, not
// an error. A byte budget under three of Pub/Sub's largest messages makes a
// split of large messages emit one or two per bundle and give the rest
// back each time.
func (cfg Config) budgetWarnings() []string {
	var out []string
	if largest := int64(pubsub.MaxPublishRequestBytes); cfg.BufferMaxBytes < 3*largest {
		out = append(out, fmt.Sprintf("pubsubio.Read: BufferMaxBytes %d holds fewer than three of Pub/Sub's largest messages (%d bytes each): a split of large messages then buffers one or two at a time and gives the rest back for redelivery at every bundle; raise it to at least %d unless every message is small",
			cfg.BufferMaxBytes, largest, 3*largest))
	}
	if !cfg.streamsMayExceedBudget() {
		return out
	}
	held, splits := cfg.mostSent()
	return append(out, fmt.Sprintf("pubsubio.Read: a worker that runs all %[1]d split(s) may be sent %[2]d unacked messages (splits x ParallelPullCount %[3]d x MaxOutstandingMessages %[4]d), more than BufferMaxMessages %[5]d: a split behind for over %[6]v then gives back what does not fit for redelivery; raise BufferMaxMessages to %[2]d or lower MaxOutstandingMessages",
		splits, held, cfg.ParallelPullCount, cfg.MaxOutstandingMessages, cfg.BufferMaxMessages, budgetWait))
}
