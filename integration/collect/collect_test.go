package collect_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
)

// Prism is ptest's default runner; it runs the SDK harness in-process.
func TestMain(m *testing.M) { ptest.Main(m) }

func init() {
	register.Function2x0[string, func(string, int)](toKV)
	register.Emitter2[string, int]()
	register.Function1x1[int, error](failOn13)
}

func toKV(s string, emit func(string, int)) { emit(s, len(s)) }

func failOn13(i int) error {
	if i == 13 {
		return errors.New("unlucky 13")
	}
	return nil
}

// runAsync runs p in the background; the returned context is cancelled,
// with the pipeline's error as cause, when it ends.
func runAsync(t *testing.T, p *beam.Pipeline) (context.Context, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() {
		err := ptest.Run(p)
		cancel(fmt.Errorf("pipeline ended: %v", err))
		done <- err
	}()
	return ctx, done
}

func waitPipeline(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("pipeline did not finish within 60s")
		return nil
	}
}

func TestIntoAwait(t *testing.T) {
	want := make([]int, 100)
	for i := range want {
		want[i] = i + 1
	}
	bucket := collect.Bucket(t)
	p, s := beam.NewPipelineWithRoot()
	collect.Into(s, bucket, beam.CreateList(s, want))

	start := time.Now()
	ctx, done := runAsync(t, p)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := collect.AwaitContext(wctx, bucket, collect.AtLeast(len(want))); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d elements arrived after %v", collect.Len(bucket), time.Since(start).Round(time.Millisecond))
	if err := waitPipeline(t, done); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	got, err := collect.ItemsOf[int](bucket)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d elements %v, want 1..100", len(got), collect.Sample(bucket, 10))
	}
	if _, err := collect.ItemsOf[string](bucket); err == nil {
		t.Fatal("ItemsOf[string] on ints: want an error")
	}
}

func TestIntoKV(t *testing.T) {
	bucket := collect.Bucket(t)
	p, s := beam.NewPipelineWithRoot()
	words := beam.CreateList(s, []string{"a", "bb", "ccc"})
	collect.Into(s, bucket, beam.ParDo(s, toKV, words))
	if err := ptest.Run(p); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if err := collect.Await(bucket, 10*time.Second, collect.AtLeast(3)); err != nil {
		t.Fatal(err)
	}
	got, err := collect.ItemsOf[collect.KV](bucket)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b collect.KV) int { return strings.Compare(a.Key.(string), b.Key.(string)) })
	want := []collect.KV{{Key: "a", Value: 1}, {Key: "bb", Value: 2}, {Key: "ccc", Value: 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestAwaitTimeoutReports: the timeout error says what did arrive.
func TestAwaitTimeoutReports(t *testing.T) {
	bucket := collect.Bucket(t)
	p, s := beam.NewPipelineWithRoot()
	collect.Into(s, bucket, beam.CreateList(s, []string{"x", "y", "z"}))
	if err := ptest.Run(p); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	err := collect.Await(bucket, 100*time.Millisecond, collect.AtLeast(5))
	if err == nil {
		t.Fatal("Await(AtLeast(5)) with 3 elements: want a timeout error")
	}
	for _, want := range []string{"3 element(s) arrived", `"x"`, "timed out after 100ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	t.Logf("timeout error: %v", err)
}

// TestAwaitStopsOnPipelineError: a failing pipeline ends the wait at once,
// with the pipeline's error, instead of running into the timeout.
func TestAwaitStopsOnPipelineError(t *testing.T) {
	bucket := collect.Bucket(t)
	p, s := beam.NewPipelineWithRoot()
	nums := beam.CreateList(s, []int{1, 13})
	beam.ParDo0(s, failOn13, nums)
	collect.Into(s, bucket, nums)
	ctx, done := runAsync(t, p)
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := collect.AwaitContext(wctx, bucket, collect.AtLeast(1000))
	if err == nil || !strings.Contains(err.Error(), "unlucky 13") {
		t.Fatalf("AwaitContext = %v, want the pipeline's error", err)
	}
	t.Logf("returned after %v: %.300s", time.Since(start).Round(time.Millisecond), err)
	if err := waitPipeline(t, done); err == nil {
		t.Fatal("pipeline succeeded, want an error")
	}
}
