// Package collect captures Beam pipeline output in tests and waits for it
// with a deadline.
//
// Pipelines in tests run on Prism in-process (the Beam Go default since
// 2.5x, loopback environment), so DoFns execute in the test binary itself
// and can append to a process-wide store. That lets a test watch output of
// a streaming pipeline while it runs — Await returns as soon as enough has
// arrived — instead of asserting only after the pipeline ends, which an
// unbounded Pub/Sub read never does. On a runner whose workers live in other
// processes (Dataflow, Prism with a docker/external environment) the
// elements land in those processes and Await times out: use passert there.
//
//	bucket := collect.Bucket(t)
//	collect.Into(s, bucket, col)
//	go func() { done <- ptest.Run(p) }()
//	if err := collect.Await(bucket, 30*time.Second, collect.AtLeast(100)); err != nil { t.Fatal(err) }
//
// The store records what the sink DoFn processed: if a runner retried a
// bundle, its elements appear twice.
package collect

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn1x0[beam.T](&sinkFn{})
	register.DoFn2x0[beam.X, beam.Y](&sinkKVFn{})
}

// KV is how elements of a KV PCollection are stored.
type KV struct {
	Key, Value any
}

func (kv KV) String() string { return fmt.Sprintf("(%v, %v)", kv.Key, kv.Value) }

// sinkFn appends every element of a non-KV PCollection to its bucket. Beam
// registration needs concrete DoFn types, so the element is a universal
// beam.T and is stored as any; ItemsOf converts back.
type sinkFn struct {
	Bucket string `json:"bucket"`
}

func (f *sinkFn) ProcessElement(elem beam.T) { add(f.Bucket, own(elem)) }

// sinkKVFn is sinkFn for KV<K, V> PCollections.
type sinkKVFn struct {
	Bucket string `json:"bucket"`
}

func (f *sinkKVFn) ProcessElement(k beam.X, v beam.Y) {
	add(f.Bucket, KV{Key: own(k), Value: own(v)})
}

// own copies byte slices, which a runner may reuse after the call.
func own(v any) any {
	if b, ok := v.([]byte); ok {
		return append([]byte(nil), b...)
	}
	return v
}

// Into appends every element of col (any element type) to bucket as it is
// processed. KV elements are stored as KV. Use a fresh bucket per test (see
// Bucket).
func Into(s beam.Scope, bucket string, col beam.PCollection) {
	s = s.Scope("collect.Into(" + bucket + ")")
	if typex.IsKV(col.Type()) {
		beam.ParDo0(s, &sinkKVFn{Bucket: bucket}, col)
		return
	}
	beam.ParDo0(s, &sinkFn{Bucket: bucket}, col)
}

type bucket struct {
	items   []any
	changed chan struct{} // closed and replaced on every append
}

var (
	mu      sync.Mutex
	buckets = map[string]*bucket{}
	seq     atomic.Int64
)

func getLocked(name string) *bucket {
	b := buckets[name]
	if b == nil {
		b = &bucket{changed: make(chan struct{})}
		buckets[name] = b
	}
	return b
}

func add(name string, v any) {
	mu.Lock()
	defer mu.Unlock()
	b := getLocked(name)
	b.items = append(b.items, v)
	close(b.changed)
	b.changed = make(chan struct{})
}

// Bucket returns a bucket name unique to this call, derived from the test
// name, and empties it when the test ends.
func Bucket(t testing.TB) string {
	name := fmt.Sprintf("%s#%d", t.Name(), seq.Add(1))
	t.Cleanup(func() { Reset(name) })
	return name
}

// Items returns a copy of everything stored in bucket so far, in arrival order.
func Items(bucket string) []any {
	mu.Lock()
	defer mu.Unlock()
	if b := buckets[bucket]; b != nil {
		return append([]any(nil), b.items...)
	}
	return nil
}

// Len returns how many elements bucket holds.
func Len(bucket string) int {
	mu.Lock()
	defer mu.Unlock()
	if b := buckets[bucket]; b != nil {
		return len(b.items)
	}
	return 0
}

// ItemsOf returns bucket's elements as T, or an error naming the first
// element that is not a T (for KV collections use T = KV).
func ItemsOf[T any](bucket string) ([]T, error) {
	items := Items(bucket)
	out := make([]T, 0, len(items))
	for i, it := range items {
		v, ok := it.(T)
		if !ok {
			var zero T
			return nil, fmt.Errorf("collect: bucket %q element %d is %T (%v), not %T", bucket, i, it, it, zero)
		}
		out = append(out, v)
	}
	return out, nil
}

// Reset empties bucket. Waiters keep waiting for new elements.
func Reset(bucket string) {
	mu.Lock()
	defer mu.Unlock()
	if b := buckets[bucket]; b != nil {
		delete(buckets, bucket)
		close(b.changed) // wake waiters; they re-read the (new, empty) bucket
	}
}

// AtLeast is a condition for Await: at least n elements arrived.
func AtLeast(n int) func(int) bool { return func(got int) bool { return got >= n } }

// Await waits until cond(number of elements in bucket) is true or timeout
// passes. On timeout the error says how many elements arrived and shows a
// short sample of them.
func Await(bucket string, timeout time.Duration, cond func(n int) bool) error {
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout,
		fmt.Errorf("timed out after %v", timeout))
	defer cancel()
	return AwaitContext(ctx, bucket, cond)
}

// AwaitContext is Await bounded by ctx. Cancel ctx with a cause (e.g. via
// context.WithCancelCause when the pipeline returns an error) to stop
// waiting early; the cause is part of the returned error.
func AwaitContext(ctx context.Context, bucket string, cond func(n int) bool) error {
	start := time.Now()
	for {
		mu.Lock()
		b := getLocked(bucket)
		n, changed := len(b.items), b.changed
		mu.Unlock()
		if cond(n) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("collect: bucket %q: condition not met after %v (%w): %d element(s) arrived; sample: %s",
				bucket, time.Since(start).Round(time.Millisecond), context.Cause(ctx), Len(bucket), Sample(bucket, 5))
		}
	}
}

// Sample formats up to max elements of bucket (each cut to 80 characters)
// for failure messages.
func Sample(bucket string, max int) string {
	items := Items(bucket)
	var parts []string
	for i, it := range items {
		if i == max {
			parts = append(parts, fmt.Sprintf("... %d more", len(items)-max))
			break
		}
		var s string
		switch v := it.(type) {
		case string, []byte:
			s = fmt.Sprintf("%q", v)
		default:
			s = fmt.Sprintf("%v", v)
		}
		if len(s) > 80 {
			s = s[:77] + "..."
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
