package publishing

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// A request while a flush runs makes it flush once more, however many
// requests came in meanwhile; Wait returns once nothing runs.
func TestFlusherFlushesAgainOnceForRequestsWhileRunning(t *testing.T) {
	var f Flusher
	var calls atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	flush := func() {
		calls.Add(1)
		started <- struct{}{}
		<-release
	}
	f.Flush(flush)
	<-started
	f.Flush(flush)
	f.Flush(flush)
	close(release)
	f.Wait()
	if got := calls.Load(); got != 2 {
		t.Errorf("flushed %d times, want 2 (the running one and one again)", got)
	}
}

// StopAll returns at its deadline although two stops never return, and
// names them.
func TestStopAllSharesOneDeadline(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	fast := func() {}
	slow := func() { <-hang }
	got := StopAll(50*time.Millisecond, fast, slow, fast, slow)
	if !slices.Equal(got, []int{1, 3}) {
		t.Errorf("abandoned %v, want [1 3]", got)
	}
	if got := StopAll(time.Second, fast, fast); len(got) != 0 {
		t.Errorf("abandoned %v of stops that return, want none", got)
	}
}
