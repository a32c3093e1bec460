package crash

import (
	"context"
	"maps"
	"sort"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// OutputWatcher receives the output subscription for the whole test and
// records, per input ID, the distinct output message IDs carrying it.
type OutputWatcher struct {
	mu         sync.Mutex
	byInput    map[string]map[string]bool // input ID -> output message IDs
	published  map[string]time.Time       // input ID -> its first output's publish time
	deliveries int
	foreign    int           // messages without the input ID attribute
	changed    chan struct{} // closed and replaced on every new output
	done       chan struct{}
	err        error
}

// watchOutput starts an OutputWatcher on sub, stopped when the test ends.
func watchOutput(t testing.TB, client *pubsub.Client, sub model.Subscription) *OutputWatcher {
	w := &OutputWatcher{byInput: map[string]map[string]bool{}, published: map[string]time.Time{}, changed: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(w.done)
		err := client.Subscriber(sub.String()).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			w.mu.Lock()
			defer w.mu.Unlock()
			w.deliveries++
			in, ok := m.Attributes[InputIDAttribute]
			if !ok {
				w.foreign++
				return
			}
			if w.byInput[in] == nil {
				w.byInput[in] = map[string]bool{}
			}
			if p, ok := w.published[in]; !ok || m.PublishTime.Before(p) {
				w.published[in] = m.PublishTime
			}
			if !w.byInput[in][m.ID] {
				w.byInput[in][m.ID] = true
				close(w.changed)
				w.changed = make(chan struct{})
			}
		})
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// Seen returns the input IDs that reached the output so far.
func (w *OutputWatcher) Seen() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := make(map[string]bool, len(w.byInput))
	for id := range w.byInput {
		seen[id] = true
	}
	return seen
}

// Published returns, by input ID, when its first copy was published to
// the output (the emulator's publish time).
func (w *OutputWatcher) Published() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.published)
}

// Distinct returns how many input IDs reached the output.
func (w *OutputWatcher) Distinct() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byInput)
}

// AwaitDistinct waits until at least n input IDs reached the output or
// timeout passes, and returns how many did.
func (w *OutputWatcher) AwaitDistinct(n int, timeout time.Duration) int {
	return awaitAtLeast(n, timeout, func() (int, <-chan struct{}) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.byInput), w.changed
	})
}

// awaitAtLeast waits until current reports at least n or timeout passes,
// and returns the last count. current returns the count and a channel that
// is closed at the next change.
func awaitAtLeast(n int, timeout time.Duration, current func() (int, <-chan struct{})) int {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		got, changed := current()
		if got >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			return got
		}
	}
}

// awaitAll waits until every one of ids reached the output or timeout
// passes, and returns the missing ones, sorted.
func (w *OutputWatcher) awaitAll(ids []string, timeout time.Duration) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		var missing []string
		for id := range want {
			if w.byInput[id] == nil {
				missing = append(missing, id)
			}
		}
		changed := w.changed
		w.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			sort.Strings(missing)
			return missing
		}
	}
}

// outputStats are the duplicate counts over ids.
type outputStats struct {
	duplicates       int // output messages beyond the first per input ID
	duplicatedInputs int // input IDs published more than once
	deliveries       int // every delivery to the watcher, redeliveries included
}

// stats counts the duplicates over ids.
func (w *OutputWatcher) stats(ids []string) outputStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := outputStats{deliveries: w.deliveries}
	for _, id := range ids {
		if n := len(w.byInput[id]); n > 1 {
			st.duplicates += n - 1
			st.duplicatedInputs++
		}
	}
	return st
}

// Duplicates counts the output messages beyond the first per input ID
// over ids.
func (w *OutputWatcher) Duplicates(ids []string) int { return w.stats(ids).duplicates }
