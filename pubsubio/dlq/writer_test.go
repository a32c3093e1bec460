package dlq

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Writer tests against pstest, the client library's in-process Pub/Sub,
// through the production writer (a real client, publisher and gRPC), with
// faults injected by reactors.

const testTimeout = 60 * time.Second

// guard bounds a test: a wait that never ends fails it instead of hanging
// the binary.
func guard(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

type reactor func(req any) (handled bool, ret any, err error)

func (r reactor) React(req any) (bool, any, error) { return r(req) }

// gate holds every Publish request until released. pstest runs reactors
// under its lock, so nothing else reaches the server while one is held
// either; the server's cleanup releases it first.
type gate struct {
	open chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) release() {
	if g != nil {
		g.once.Do(func() { close(g.open) })
	}
}

type fakeServer struct {
	srv  *pstest.Server
	gate *gate
}

// newFakeServer starts pstest with opts, holding every publish at g when g
// is not nil; the dead-letter topic exists unless missing is set.
func newFakeServer(t *testing.T, missing bool, g *gate, opts ...pstest.ServerReactorOption) *fakeServer {
	t.Helper()
	if g != nil {
		opts = append(opts, pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactor(func(any) (bool, any, error) {
			<-g.open
			return false, nil, nil
		})})
	}
	srv := pstest.NewServer(opts...)
	t.Cleanup(func() {
		g.release()
		srv.Close()
	})
	if !missing {
		admin, err := connection.NewClient(context.Background(), dlqTopic.Project, connection.Settings{EmulatorEndpoint: srv.Addr})
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		if _, err := admin.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: dlqTopic.String()}); err != nil {
			t.Fatal(err)
		}
	}
	return &fakeServer{srv: srv, gate: g}
}

// writer returns a production writer on f with cfg (Topic and Connection
// filled in), closed when the test ends.
func (f *fakeServer) writer(t *testing.T, cfg Config) *writer {
	t.Helper()
	cfg.Topic = dlqTopic
	cfg.Connection = connection.Settings{EmulatorEndpoint: f.srv.Addr}
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWriter(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.gate.release()
		w.close(context.Background())
	})
	w.startBundle()
	return w
}

// deadLetters decodes what pstest holds for the dead-letter topic, in
// publish order.
func (f *fakeServer) deadLetters(t *testing.T) []FailedMessage {
	t.Helper()
	var out []FailedMessage
	for _, m := range f.srv.Messages() {
		if m.Topic != dlqTopic.String() {
			continue
		}
		got, err := Decode(model.Message{ID: m.ID, Data: m.Data, Attributes: m.Attributes})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got)
	}
	return out
}

// failures returns n sink failures, message i with payload "i".
func failures(n int) []FailedMessage {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	out := make([]FailedMessage, n)
	for i := range out {
		f := New(StagePublish, model.Message{Data: []byte(fmt.Sprint(i)), Attributes: map[string]string{"i": fmt.Sprint(i)}},
			status.Error(codes.InvalidArgument, "rejected"), 1, at)
		f.Topic = model.TopicOf("pubsubio-test", "events")
		out[i] = f
	}
	return out
}

// processAll processes fs, failing the test on an error.
func processAll(ctx context.Context, t *testing.T, w *writer, fs []FailedMessage) {
	t.Helper()
	for _, f := range fs {
		if err := w.process(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
}

// samePayloads reports whether got holds each of want's payloads once.
func samePayloads(got, want []FailedMessage) error {
	seen := map[string]int{}
	for _, g := range got {
		seen[string(g.Message.Data)]++
	}
	for _, w := range want {
		if seen[string(w.Message.Data)] != 1 {
			return fmt.Errorf("payload %q arrived %d times, want once (%d dead letters arrived)", w.Message.Data, seen[string(w.Message.Data)], len(got))
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d dead letters arrived, want %d", len(got), len(want))
	}
	return nil
}

// Every wait the in-flight bound asks for, and the one at the end of the
// bundle; what arrives decodes to what was written.
func TestWriterWaitsAtTheBoundAndTheBundleEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max, n    int
		waits     int64 // in process, then at the end
		bundleEnd bool
	}{
		{"default", 0, 25, 1, true},
		{"bound 10", 10, 25, 3, true},
		{"bound 5, a multiple", 5, 10, 2, false},
		{"synchronous", Synchronous, 7, 7, false},
		{"bundle end only", FlushAtBundleEnd, 25, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := guard(t)
			f := newFakeServer(t, false, nil)
			w := f.writer(t, Config{MaxInFlightMessages: tc.max})
			sent := failures(tc.n)
			processAll(ctx, t, w, sent)
			before := w.stats.nwaits
			if err := w.finishBundle(ctx); err != nil {
				t.Fatal(err)
			}
			if w.stats.nwaits != tc.waits || (w.stats.nwaits > before) != tc.bundleEnd {
				t.Errorf("%d waits (%d before the end of the bundle), want %d (one at the end: %v)", w.stats.nwaits, before, tc.waits, tc.bundleEnd)
			}
			if w.stats.published.Load() != int64(tc.n) || len(w.unconfirmed) != 0 {
				t.Errorf("published %d, pending %d; want %d and 0", w.stats.published.Load(), len(w.unconfirmed), tc.n)
			}
			got := f.deadLetters(t)
			if err := samePayloads(got, sent); err != nil {
				t.Fatal(err)
			}
			for _, g := range got {
				if string(g.Message.Data) == "0" && !sameFailure(g, carried(sent[0])) {
					t.Errorf("dead letter 0 decoded to %+v, want %+v", g, carried(sent[0]))
				}
			}
		})
	}
}

// Under FlushAtBundleEnd nothing in ProcessElement waits, however slow
// Pub/Sub is; the end of the bundle does.
func TestWriterFlushOnlyAtBundleEnd(t *testing.T) {
	ctx := guard(t)
	g := newGate()
	f := newFakeServer(t, false, g)
	w := f.writer(t, Config{MaxInFlightMessages: FlushAtBundleEnd})
	sent := failures(1500) // past the default bound
	processAll(ctx, t, w, sent)
	if w.stats.nwaits != 0 || w.stats.published.Load() != 0 {
		t.Fatalf("with Pub/Sub holding every publish: %d waits, %d published, want none", w.stats.nwaits, w.stats.published.Load())
	}
	g.release()
	if err := w.finishBundle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := samePayloads(f.deadLetters(t), sent); err != nil {
		t.Fatal(err)
	}
}

// A wait Pub/Sub does not answer ends at FlushTimeout and fails the
// bundle, at the bound and at the end of the bundle; the next bundle starts
// clean.
func TestWriterFlushTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		max  int
		want string
	}{
		{"at the bound", 5, "5 dead letters reached MaxInFlightMessages"},
		{"at the end of the bundle", FlushAtBundleEnd, "flushing at the end of the bundle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := guard(t)
			g := newGate()
			f := newFakeServer(t, false, g)
			w := f.writer(t, Config{MaxInFlightMessages: tc.max, FlushTimeout: timeout})
			start := time.Now()
			var err error
			for _, m := range failures(5) {
				if err = w.process(ctx, m); err != nil {
					break
				}
			}
			if err == nil {
				err = w.finishBundle(ctx)
			}
			took := time.Since(start)
			if err == nil {
				t.Fatal("the bundle succeeded with Pub/Sub holding every publish")
			}
			for _, want := range []string{"confirmed 0 of 5", dlqTopic.String(), "FlushTimeout 300ms", tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if took < timeout || took > timeout+5*time.Second {
				t.Errorf("the wait took %v, want FlushTimeout %v and not much more", took, timeout)
			}
			if w.stats.stalled != 5 || w.stats.last < timeout.Milliseconds() {
				t.Errorf("in flight after the expiry %d, last wait %d ms; want 5 and at least %d", w.stats.stalled, w.stats.last, timeout.Milliseconds())
			}

			// The runner retries the bundle; Pub/Sub answers again.
			g.release()
			w.startBundle()
			retry := failures(3)
			processAll(ctx, t, w, retry)
			if err := w.finishBundle(ctx); err != nil {
				t.Fatalf("the retried bundle: %v", err)
			}
			if w.stats.stalled != 0 {
				t.Errorf("in flight after a good bundle: %d", w.stats.stalled)
			}
		})
	}
}

// The dead-letter topic is never created: a missing one fails the bundle
// with an error naming it, and still does not exist afterwards.
func TestWriterMissingTopic(t *testing.T) {
	ctx := guard(t)
	var creates int
	f := newFakeServer(t, true, nil, pstest.ServerReactorOption{FuncName: "CreateTopic", Reactor: reactor(func(any) (bool, any, error) {
		creates++
		return false, nil, nil
	})})
	w := f.writer(t, Config{})
	processAll(ctx, t, w, failures(3))
	err := w.finishBundle(ctx)
	if err == nil {
		t.Fatal("the bundle succeeded without a dead-letter topic")
	}
	for _, want := range []string{dlqTopic.String(), "does not exist", "never creates its topic", "create it and a subscription"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if creates != 0 || len(f.deadLetters(t)) != 0 {
		t.Errorf("CreateTopic called %d times, %d dead letters stored", creates, len(f.deadLetters(t)))
	}
	if _, err := w.client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: dlqTopic.String()}); status.Code(err) != codes.NotFound {
		t.Errorf("GetTopic after the failure: %v, want NOT_FOUND", err)
	}
}

// Errors injected by pstest: one the client does not retry fails the
// bundle naming the code and what to do; a transient one the client
// retries within the wait.
func TestWriterInjectedErrors(t *testing.T) {
	t.Run("permission denied", func(t *testing.T) {
		ctx := guard(t)
		f := newFakeServer(t, false, nil, pstest.WithErrorInjection("Publish", codes.PermissionDenied, "caller lacks pubsub.topics.publish"))
		w := f.writer(t, Config{MaxInFlightMessages: Synchronous})
		err := w.process(ctx, failures(1)[0])
		if err == nil {
			t.Fatal("a denied publish succeeded")
		}
		for _, want := range []string{dlqTopic.String(), "PERMISSION_DENIED", "caller lacks pubsub.topics.publish", "roles/pubsub.publisher"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		}
	})
	t.Run("unavailable once", func(t *testing.T) {
		ctx := guard(t)
		var calls int
		f := newFakeServer(t, false, nil, pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactor(func(any) (bool, any, error) {
			if calls++; calls == 1 {
				return true, nil, status.Error(codes.Unavailable, "try again")
			}
			return false, nil, nil
		})})
		w := f.writer(t, Config{})
		sent := failures(20)
		processAll(ctx, t, w, sent)
		if err := w.finishBundle(ctx); err != nil {
			t.Fatalf("a transient UNAVAILABLE failed the bundle: %v", err)
		}
		if err := samePayloads(f.deadLetters(t), sent); err != nil {
			t.Fatal(err)
		}
		if calls < 2 {
			t.Errorf("%d Publish calls, want the client's retry", calls)
		}
	})
}

// A failed message whose error text is megabytes long is published with
// the text cut, not rejected.
func TestWriterMegabyteError(t *testing.T) {
	ctx := guard(t)
	f := newFakeServer(t, false, nil)
	w := f.writer(t, Config{MaxInFlightMessages: Synchronous})
	m := failures(1)[0]
	m.Error = strings.Repeat("e", 3<<20)
	if err := w.process(ctx, m); err != nil {
		t.Fatal(err)
	}
	got := f.deadLetters(t)
	if len(got) != 1 || len(got[0].Error) > MaxErrorBytes || !strings.HasSuffix(got[0].Error, "...") || string(got[0].Message.Data) != "0" {
		t.Fatalf("dead letters %v", got)
	}
}

// A publisher that does not stop within ShutdownTimeout is abandoned and
// counted; closing returns within the bound.
func TestWriterShutdownTimeout(t *testing.T) {
	ctx := guard(t)
	f := newFakeServer(t, false, newGate())
	w := f.writer(t, Config{MaxInFlightMessages: FlushAtBundleEnd, ShutdownTimeout: 200 * time.Millisecond})
	var warned []string
	w.warnf = func(_ context.Context, format string, args ...any) {
		warned = append(warned, fmt.Sprintf(format, args...))
	}
	if err := w.process(ctx, failures(1)[0]); err != nil {
		t.Fatal(err)
	}
	before := shutdownsAbandoned.Load()
	start := time.Now()
	if err := w.close(ctx); err != nil {
		t.Logf("close: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("close took %v with ShutdownTimeout 200ms", took)
	}
	if n := shutdownsAbandoned.Load() - before; n != 1 || len(warned) != 1 || !strings.Contains(warned[0], dlqTopic.String()) {
		t.Errorf("abandoned %d, warnings %q; want one naming the topic", n, warned)
	}
}
