package main

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// tracingResult is the tracing case: one Read -> Write pipeline run with
// Tracing off and on, on both, interleaved.
type tracingResult struct {
	messages, size int
	off, on        contender
}

func (r tracingResult) String() string {
	return fmt.Sprintf("\n| tracing case (Read -> Write, %d messages of %d B from a traced publisher, 1 split, %d runs each) | msg/s | CPU µs/msg | allocs/msg |\n|---|---|---|---|\n"+
		"| Tracing off | %.0f | %s | %.0f |\n| Tracing on, every span sampled and batch-exported | %.0f | %s | %.0f |\n"+
		"| on vs off | **%.2f** | **+%s** | +%.0f |\n",
		r.messages, r.size, len(r.off.samples),
		r.off.rate(), micros(r.off.cpu()), r.off.allocs(),
		r.on.rate(), micros(r.on.cpu()), r.on.allocs(),
		r.on.rate()/r.off.rate(), micros(r.on.cpu()-r.off.cpu()), r.on.allocs()-r.off.allocs())
}

// discardSpans is an exporter that drops what it is given: the cost of
// tracing up to the wire, without a collector's.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// measureTracing reads one fresh backlog per run and contender (one
// subscription, one split) and writes every message to another topic,
// with ReadConfig.Tracing and WriteConfig.Tracing both off or both on,
// interleaved. The backlog's messages carry a publisher's trace context,
// as a traced publisher's do. The OpenTelemetry SDK is the global
// TracerProvider throughout, sampling every span and batch-exporting it to
// nowhere: with Tracing off it is never called. The CPU per message is
// the whole process's, Prism's included, over the whole run.
func measureTracing(ctx context.Context, e *env, messages, size int) (tracingResult, error) {
	r := tracingResult{messages: messages, size: size}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	otel.SetTracerProvider(tp)
	defer func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		_ = tp.Shutdown(context.Background())
	}()
	traced := func(i int) map[string]string {
		return map[string]string{"googclient_traceparent": fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)}
	}
	c := readCase{size: size, splitsPerSub: 1, subs: 1, messages: messages}
	entrants := []struct {
		name string
		on   bool
		who  *contender
	}{{"tracing-off", false, &r.off}, {"tracing-on", true, &r.on}}
	for run := range *runs {
		for i := range entrants {
			k := entrants[(i+run)%len(entrants)]
			ps, err := e.newPairs(ctx, "t", 2) // read from the first, write to the second
			if err != nil {
				return r, err
			}
			if err := e.backlogWith(ctx, ps[:1], messages, size, traced); err != nil {
				return r, err
			}
			write := func(s beam.Scope, msgs beam.PCollection) beam.PCollection {
				pubsubio.Write(s, pubsubio.WriteConfig{Topic: ps[1].topic, Tracing: k.on, Connection: e.conn}, msgs)
				return msgs
			}
			s, err := measured(k.name, messages, func() (float64, error) {
				return readWithSourceConfig(ctx, e, c, ps[:1], pubsubio.ReadConfig{Tracing: k.on}, sourceOptions{through: write})
			})
			e.drop(ctx, ps)
			if err != nil {
				k.who.fail(k.name, run, err)
				continue
			}
			k.who.add(s)
			fmt.Printf("  tracing case run %d: %-11s %8.0f msg/s  cpu %s µs/msg  %.0f allocs/msg\n", run+1, k.name, s.rate, micros(s.cpu), s.allocs)
		}
	}
	if !r.off.ran() || !r.on.ran() {
		return r, fmt.Errorf("the tracing case did not complete a run of each contender")
	}
	return r, nil
}
