package source

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// AckLatencySummary describes, for this process, how long messages waited
// between their emission by a bundle and their ack: the time the runner
// took to commit the bundle and the source took to notice. A message whose
// wait nears the subscription's ack deadline risks redelivery.
type AckLatencySummary struct {
	Count    int64
	P50, P99 time.Duration // upper bounds of the histogram buckets they fall in
	Max      time.Duration
}

// AckLatency summarises every ack of this process since it started (or the
// last ResetAckLatency), across all reads. It sees acks this process sent
// for messages it emitted; an ack sent with the RPC for a message another
// worker emitted is not in it. Meant for benchmarks, tests and local runs:
// on a distributed runner each worker holds its own.
func AckLatency() AckLatencySummary { return ackLatencies.summary() }

// ResetAckLatency forgets what AckLatency has seen.
func ResetAckLatency() { ackLatencies.reset() }

var ackLatencies latencyHistogram

// latencyHistogram is a lock-free log-linear histogram of durations in
// microseconds: eight buckets per power of two, so a quantile is reported
// within 12.5 % of its value, in 512 counters.
type latencyHistogram struct {
	buckets [64 * subBuckets]atomic.Int64
	count   atomic.Int64
	max     atomic.Int64
}

const subBucketBits = 3
const subBuckets = 1 << subBucketBits

func (h *latencyHistogram) record(d time.Duration) {
	us := max(d.Microseconds(), 0)
	h.buckets[bucketOf(uint64(us))].Add(1)
	h.count.Add(1)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			return
		}
	}
}

// bucketOf maps v to its bucket: values below subBuckets have their own;
// above, the bucket is the power of two and the next subBucketBits bits.
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	e := bits.Len64(v) - 1
	sub := (v >> (e - subBucketBits)) & (subBuckets - 1)
	return (e-subBucketBits+1)*subBuckets + int(sub)
}

// upperBound is the largest value bucket i holds.
func upperBound(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	e := i/subBuckets + subBucketBits - 1
	sub := uint64(i % subBuckets)
	low := uint64(1)<<e | sub<<(e-subBucketBits)
	return low + 1<<(e-subBucketBits) - 1
}

func (h *latencyHistogram) summary() AckLatencySummary {
	s := AckLatencySummary{Count: h.count.Load(), Max: time.Duration(h.max.Load()) * time.Microsecond}
	if s.Count == 0 {
		return s
	}
	var counts [len(h.buckets)]int64
	var total int64
	for i := range h.buckets {
		counts[i] = h.buckets[i].Load()
		total += counts[i]
	}
	s.P50 = h.quantile(counts[:], total, 0.50)
	s.P99 = h.quantile(counts[:], total, 0.99)
	return s
}

func (h *latencyHistogram) quantile(counts []int64, total int64, q float64) time.Duration {
	rank := int64(q*float64(total-1)) + 1
	var seen int64
	for i, c := range counts {
		if seen += c; seen >= rank {
			return time.Duration(upperBound(i)) * time.Microsecond
		}
	}
	return 0
}

func (h *latencyHistogram) reset() {
	for i := range h.buckets {
		h.buckets[i].Store(0)
	}
	h.count.Store(0)
	h.max.Store(0)
}
