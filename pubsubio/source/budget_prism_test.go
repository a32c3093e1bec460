package source

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// A byte budget that holds two of the messages (1 MiB against 400 KiB)
// reads them all: what is buffered is never given back at the budget, so
// every bundle emits what the one before left buffered. The run is bounded;
// a read that stops progressing fails with what was acked. Flow control
// is set above the budget (the client's defaults), or off: left unset, it
// would be the budget's share and the budget would never bind.
func TestSmallByteBudgetReadsEverythingOnPrism(t *testing.T) {
	skipUnderShort(t)
	for name, maxOutstanding := range map[string]int{"with flow control": DefaultMaxOutstandingBytes, "without flow control": -1} {
		t.Run(name, func(t *testing.T) {
			const n, size = 20, 400 << 10
			f := newFakeServer(t)
			topic, subs := f.topicWithSubs(t, "large", 1)
			ids := f.publishLarge(t, topic, n, size)

			p, s := beam.NewPipelineWithRoot()
			Read(s, Config{
				Subscriptions:          subs,
				BufferMaxBytes:         1 << 20,
				MaxOutstandingMessages: min(maxOutstanding, DefaultMaxOutstandingMessages),
				MaxOutstandingBytes:    maxOutstanding,
				IdleTimeout:            3 * time.Second,
				Connection:             f.conn,
			})
			res, err := runBounded(t, p, 3*time.Minute)
			if err != nil {
				t.Fatalf("pipeline failed: %v", err)
			}
			if got := f.acked(ids); got != n {
				t.Errorf("%d of %d messages acked", got, n)
			}
			if got := counterValue(res, "messages_nacked_budget"); got == 0 {
				t.Error("messages_nacked_budget = 0: the budget never bound, so the test did not exercise it")
			}
		})
	}
}
