package sink

import (
	"context"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// fnHarness is a writeFn whose Setup builds fake backends, recorded in
// order.
func fnHarness(t *testing.T, cfg Config) (*writeFn, *[]*fakeBackend) {
	t.Helper()
	cfg.Topic = validTopic
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var built []*fakeBackend
	prev := newBackend
	newBackend = func(_ context.Context, cfg Config) (backend, error) {
		be := newFakeBackend(cfg.Publisher.CountThreshold)
		built = append(built, be)
		return be, nil
	}
	t.Cleanup(func() { newBackend = prev })
	return &writeFn{Cfg: cfg}, &built
}

// Beam Go's harness drops the execution plan of a failed bundle without
// tearing it down (and never reuses it), so Teardown never runs for a
// writer whose bundle failed. The writer releases its publishers and its
// connection itself when a bundle fails; otherwise every failed bundle (an
// outage retried for hours) would leave a client and its publishers
// behind. Should the instance be used again, it starts on a new client.
func TestFailedBundleReleasesTheWriter(t *testing.T) {
	ctx := guard(t)
	fn, built := fnHarness(t, Config{Publisher: PublisherOptions{CountThreshold: 1000}})
	emit := func(beam.EventTime, dlq.FailedMessage) {}
	if err := fn.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fn.StartBundle(ctx, emit); err != nil {
		t.Fatal(err)
	}
	if err := fn.ProcessElement(ctx, mtime.Now(), model.Message{Data: []byte("a")}, emit); err != nil {
		t.Fatal(err)
	}
	// A message with an ordering key while ordering is disabled fails the
	// bundle.
	if err := fn.ProcessElement(ctx, mtime.Now(), model.Message{Data: []byte("b"), OrderingKey: "k"}, emit); err == nil {
		t.Fatal("want the bundle to fail")
	}
	first := (*built)[0]
	first.waitEvent(t, "stop "+validTopic.ID)
	first.waitEvent(t, "close")

	if err := fn.StartBundle(ctx, emit); err != nil {
		t.Fatal(err)
	}
	if err := fn.ProcessElement(ctx, mtime.Now(), model.Message{Data: []byte("c")}, emit); err != nil {
		t.Fatal(err)
	}
	if err := fn.FinishBundle(ctx, emit); err != nil {
		t.Fatal(err)
	}
	if len(*built) != 2 {
		t.Fatalf("%d backends built, want a new one for the bundle after the failure", len(*built))
	}
	if got := (*built)[1].delivered(validTopic); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("the next bundle delivered %v, want [c]", got)
	}
	if err := fn.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
}
