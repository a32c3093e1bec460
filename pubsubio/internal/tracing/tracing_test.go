package tracing

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var (
	traceID = trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	spanID  = trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
)

func remote(state string) context.Context {
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		panic(err)
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	}))
}

// Inject writes the span context under the client's keys, into a copy;
// Extract reads it back.
func TestInjectExtract(t *testing.T) {
	orig := map[string]string{"k": "v", TraceStateAttribute: "old=1"}
	got := Inject(remote(""), orig)
	if len(orig) != 2 || orig[TraceParentAttribute] != "" {
		t.Errorf("Inject changed the attributes it was given: %v", orig)
	}
	want := "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"
	if got[TraceParentAttribute] != want || got["k"] != "v" {
		t.Errorf("Inject = %v, want %s=%s and k kept", got, TraceParentAttribute, want)
	}
	if _, ok := got[TraceStateAttribute]; ok {
		t.Errorf("Inject kept the old context's trace state: %v", got)
	}
	withState := Inject(remote("vendor=x"), nil)
	if withState[TraceStateAttribute] != "vendor=x" {
		t.Errorf("Inject = %v, want the trace state under %s", withState, TraceStateAttribute)
	}
	sc := trace.SpanContextFromContext(Extract(context.Background(), withState))
	if sc.TraceID() != traceID || sc.SpanID() != spanID || !sc.IsRemote() || sc.TraceState().Get("vendor") != "x" {
		t.Errorf("Extract = %+v, want the injected context", sc)
	}
}

// A message at Pub/Sub's limit of attributes stays within it: it carries
// no new trace context, or one without its state, and is counted; a
// context it already carries is replaced.
func TestInjectAtTheAttributeLimit(t *testing.T) {
	attrs := func(n int, extra ...string) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%03d", i)] = "v"
		}
		for _, k := range extra {
			m[k] = "00-0102030405060708090a0b0c0d0e0f10-0807060504030201-01"
		}
		return m
	}
	for _, c := range []struct {
		name        string
		attrs       map[string]string
		state       string
		wantLen     int
		wantParent  bool
		wantState   bool
		wantSkipped int64
	}{
		{"room for both", attrs(98), "vendor=x", 100, true, true, 0},
		{"room for the parent only", attrs(99), "vendor=x", 100, true, false, 0},
		{"no room", attrs(100), "", 100, false, false, 1},
		{"a parent to replace", attrs(99, TraceParentAttribute), "", 100, true, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := contextSkipped.Load()
			got := Inject(remote(c.state), c.attrs)
			_, parent := got[TraceParentAttribute]
			_, state := got[TraceStateAttribute]
			if len(got) != c.wantLen || parent != c.wantParent || state != c.wantState {
				t.Errorf("Inject: %d attributes, traceparent %v, tracestate %v; want %d, %v, %v", len(got), parent, state, c.wantLen, c.wantParent, c.wantState)
			}
			if c.wantParent && got[TraceParentAttribute] != "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01" {
				t.Errorf("Inject: traceparent %q, want the new context's", got[TraceParentAttribute])
			}
			if n := contextSkipped.Load() - before; n != c.wantSkipped {
				t.Errorf("trace_context_skipped grew by %d, want %d", n, c.wantSkipped)
			}
		})
	}
}

// Without a span context there is nothing to carry or to read.
func TestNoContext(t *testing.T) {
	attrs := map[string]string{"k": "v"}
	if got := Inject(context.Background(), attrs); len(got) != 1 {
		t.Errorf("Inject without a span = %v, want the attributes as they were", got)
	}
	for _, a := range []map[string]string{nil, attrs, {TraceParentAttribute: "garbage"}} {
		if sc := trace.SpanContextFromContext(Extract(context.Background(), a)); sc.IsValid() {
			t.Errorf("Extract(%v) = %+v, want no span context", a, sc)
		}
	}
}

// The keys are the ones Pub/Sub takes from a publisher.
func TestKeysAreTaken(t *testing.T) {
	for _, k := range []string{TraceParentAttribute, TraceStateAttribute} {
		if p := model.AttributeKeyProblem(k); p != "" {
			t.Errorf("%s: %s", k, p)
		}
	}
}
