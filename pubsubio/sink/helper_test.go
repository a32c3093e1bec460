package sink

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// This file is the in-memory fake behind most writer tests: a backend whose
// publishers batch per ordering key like the client's (a batch leaves at
// CountThreshold or on flush), pause a key after a failure and fail its
// later batches with pubsub.ErrPublishingPaused, and can hold sent batches
// without a verdict until the test releases them.

// fakeBackend creates fakePubs and records topic creations.
type fakeBackend struct {
	threshold int

	mu sync.Mutex
	// verdict decides a sent batch; nil accepts everything.
	verdict func(topic model.Topic, batch []*pubsub.Message) error
	// hold makes new publishers keep sent batches without a verdict.
	hold bool
	// stopGate, when set, blocks every stop until it is closed.
	stopGate chan struct{}
	// createErr is what createTopic returns.
	createErr error
	created   []*pubsubpb.Topic
	pubs      []*fakePub
	closed    bool

	events chan string // "flush <topic>", "stop <topic>", "sent <topic> <n>", "close"
}

func newFakeBackend(threshold int) *fakeBackend {
	return &fakeBackend{threshold: threshold, events: make(chan string, 10000)}
}

func (b *fakeBackend) event(format string, args ...any) {
	select {
	case b.events <- fmt.Sprintf(format, args...):
	default:
	}
}

// waitEvent waits (bounded) for an event starting with prefix and returns
// it; it fails the test naming what did arrive.
func (b *fakeBackend) waitEvent(t *testing.T, prefix string) string {
	t.Helper()
	var seen []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-b.events:
			if strings.HasPrefix(e, prefix) {
				return e
			}
			seen = append(seen, e)
		case <-timeout:
			t.Fatalf("no %q event within 10s; saw %v", prefix, seen)
		}
	}
}

func (b *fakeBackend) publisher(topic model.Topic) publisher {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &fakePub{be: b, topic: topic, hold: b.hold, batches: map[string][]*fakeMsg{}, paused: map[string]bool{}}
	b.pubs = append(b.pubs, p)
	return p
}

func (b *fakeBackend) createTopic(_ context.Context, t *pubsubpb.Topic) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.created = append(b.created, t)
	return b.createErr
}

func (b *fakeBackend) close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.event("close")
	return nil
}

// publishers returns the publishers created for topic, oldest first.
func (b *fakeBackend) publishers(topic model.Topic) []*fakePub {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ps []*fakePub
	for _, p := range b.pubs {
		if p.topic == topic {
			ps = append(ps, p)
		}
	}
	return ps
}

// delivered returns the payloads every publisher for topic delivered, in
// delivery order per publisher.
func (b *fakeBackend) delivered(topic model.Topic) []string {
	var out []string
	for _, p := range b.publishers(topic) {
		p.mu.Lock()
		for _, m := range p.delivered {
			out = append(out, string(m.Data))
		}
		p.mu.Unlock()
	}
	return out
}

type fakeMsg struct {
	m   *pubsub.Message
	res *fakeResult
}

type fakeResult struct {
	ready chan struct{}
	id    string
	err   error
}

func newFakeResult() *fakeResult { return &fakeResult{ready: make(chan struct{})} }

func (r *fakeResult) Ready() <-chan struct{} { return r.ready }
func (r *fakeResult) Get(ctx context.Context) (string, error) {
	select {
	case <-r.ready:
		return r.id, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
func (r *fakeResult) resolve(id string, err error) {
	r.id, r.err = id, err
	close(r.ready)
}

// fakePub is one topic's publisher.
type fakePub struct {
	be    *fakeBackend
	topic model.Topic

	mu        sync.Mutex
	hold      bool
	batches   map[string][]*fakeMsg // by ordering key, not yet sent
	held      [][]*fakeMsg          // sent, verdict withheld
	delivered []*pubsub.Message
	paused    map[string]bool
	resumed   []string
	stopped   bool
	nextID    int
}

func (p *fakePub) publish(m *pubsub.Message) result {
	r := newFakeResult()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		r.resolve("", pubsub.ErrPublisherStopped)
		return r
	}
	k := m.OrderingKey
	p.batches[k] = append(p.batches[k], &fakeMsg{m: m, res: r})
	if len(p.batches[k]) >= p.be.threshold {
		p.sendLocked(k)
	}
	return r
}

func (p *fakePub) sendLocked(key string) {
	batch := p.batches[key]
	if len(batch) == 0 {
		return
	}
	delete(p.batches, key)
	p.be.event("sent %s %d", p.topic.ID, len(batch))
	if p.hold {
		p.held = append(p.held, batch)
		return
	}
	p.resolveLocked(batch)
}

// resolveLocked gives a sent batch its verdict, like publishMessageBundle.
func (p *fakePub) resolveLocked(batch []*fakeMsg) {
	key := batch[0].m.OrderingKey
	var err error
	if key != "" && p.paused[key] {
		err = pubsub.ErrPublishingPaused{OrderingKey: key}
	} else if v := p.be.verdictFunc(); v != nil {
		msgs := make([]*pubsub.Message, len(batch))
		for i, f := range batch {
			msgs[i] = f.m
		}
		err = v(p.topic, msgs)
	}
	if err != nil && key != "" {
		p.paused[key] = true
	}
	for _, f := range batch {
		if err != nil {
			f.res.resolve("", err)
			continue
		}
		p.nextID++
		p.delivered = append(p.delivered, f.m)
		f.res.resolve(fmt.Sprint(p.nextID), nil)
	}
}

func (b *fakeBackend) setVerdict(v func(model.Topic, []*pubsub.Message) error) {
	b.mu.Lock()
	b.verdict = v
	b.mu.Unlock()
}

func (b *fakeBackend) verdictFunc() func(model.Topic, []*pubsub.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.verdict
}

func (p *fakePub) flush() {
	p.mu.Lock()
	for k := range p.batches {
		p.sendLocked(k)
	}
	p.mu.Unlock()
	p.be.event("flush %s", p.topic.ID)
}

// release gives the first n held batches their verdicts (all when n < 0)
// and returns how many it released.
func (p *fakePub) release(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n < 0 || n > len(p.held) {
		n = len(p.held)
	}
	for _, b := range p.held[:n] {
		p.resolveLocked(b)
	}
	p.held = p.held[n:]
	return n
}

// setHold switches holding on or off; switching it off releases what is
// held.
func (p *fakePub) setHold(hold bool) {
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
	if !hold {
		p.release(-1)
	}
}

func (p *fakePub) resume(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.paused, key)
	p.resumed = append(p.resumed, key)
}

func (p *fakePub) stop() {
	p.be.event("stop %s", p.topic.ID)
	p.be.mu.Lock()
	gate := p.be.stopGate
	p.be.mu.Unlock()
	if gate != nil {
		<-gate
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.batches {
		p.sendLocked(k)
	}
	for _, b := range p.held {
		p.resolveLocked(b)
	}
	p.held = nil
	p.stopped = true
}

func (p *fakePub) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// harness is a writer on a fake backend with a bounded test context, a
// recording logger and a dead-letter collector.
type harness struct {
	t    *testing.T
	ctx  context.Context
	be   *fakeBackend
	w    *writer
	mu   sync.Mutex
	warn []string
	dead []dlq.FailedMessage
}

// testTimeout bounds every test: a broken in-flight predicate makes a wait
// hang, and the guard turns that into a failure with every goroutine's
// stack instead of a test binary killed by the go tool much later.
const testTimeout = 60 * time.Second

func guard(t *testing.T) context.Context {
	t.Helper()
	name := t.Name()
	timer := time.AfterFunc(testTimeout, func() {
		panic(fmt.Sprintf("%s did not finish within %v: a wait never ended", name, testTimeout))
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout-5*time.Second)
	t.Cleanup(func() {
		timer.Stop()
		cancel()
	})
	return ctx
}

func newHarness(t *testing.T, cfg Config, be *fakeBackend) *harness {
	t.Helper()
	h := buildHarness(t, cfg, func(cfg Config) backend {
		if be == nil {
			be = newFakeBackend(cfg.Publisher.CountThreshold)
		}
		return be
	})
	h.be = be
	return h
}

// buildHarness applies the defaults to cfg (with validTopic as the default
// topic unless set) and builds the writer on the backend mk returns.
func buildHarness(t *testing.T, cfg Config, mk func(Config) backend) *harness {
	t.Helper()
	if cfg.Topic.IsZero() {
		cfg.Topic = validTopic
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: guard(t)}
	h.w = newWriter(cfg, mk(cfg))
	h.w.warnf = func(_ context.Context, format string, args ...any) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.warn = append(h.warn, fmt.Sprintf(format, args...))
	}
	h.w.infof = func(context.Context, string, ...any) {}
	return h
}

func (h *harness) emit(f dlq.FailedMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dead = append(h.dead, f)
}

// process and finish call the writer as writeFn does: each call, then the
// dead letters it routed.
func (h *harness) process(m model.Message) error {
	err := h.w.process(h.ctx, testEventTime, m)
	h.collect()
	return err
}

func (h *harness) mustProcess(m model.Message) {
	h.t.Helper()
	if err := h.process(m); err != nil {
		h.t.Fatalf("process(%q): %v", m.Data, err)
	}
}

func (h *harness) finish() error {
	err := h.w.finishBundle(h.ctx)
	h.collect()
	return err
}

func (h *harness) collect() {
	for _, d := range h.w.takeDeadLetters() {
		if !d.eventTime.Equal(testEventTime) {
			h.t.Errorf("a dead letter of %q at %v, want its message's event time %v", d.failed.Message.Data, d.eventTime, testEventTime)
		}
		h.emit(d.failed)
	}
}

// testEventTime is every harness message's event time.
var testEventTime = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func (h *harness) mustFinish() {
	h.t.Helper()
	if err := h.finish(); err != nil {
		h.t.Fatalf("finishBundle: %v", err)
	}
}

func (h *harness) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.warn...)
}

func (h *harness) deadLetters() []dlq.FailedMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]dlq.FailedMessage(nil), h.dead...)
}

// async runs f on another goroutine and returns a channel with its result.
func async(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

// within waits (bounded) for a result from async.
func within(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not return within 20s", what)
		return nil
	}
}

// msg is a message with payload data to topic (the default when zero).
func msg(data string, topic ...model.Topic) model.Message {
	m := model.Message{Data: []byte(data)}
	if len(topic) > 0 {
		m.Topic = topic[0]
	}
	return m
}

func topicN(i int) model.Topic { return model.TopicOf("pubsubio-test", fmt.Sprintf("topic-%d", i)) }

// notFoundUntilCreated answers NOT_FOUND until the backend created a topic.
func notFoundUntilCreated(be *fakeBackend) func(model.Topic, []*pubsub.Message) error {
	return func(topic model.Topic, _ []*pubsub.Message) error {
		be.mu.Lock()
		defer be.mu.Unlock()
		if len(be.created) == 0 {
			return status.Errorf(codes.NotFound, "Resource not found (resource=%s)", topic.ID)
		}
		return nil
	}
}

// releaseObserved releases the held batch at index i of p and waits until
// the writer has classified its verdict, so that the test fixes the order
// in which failures are observed.
func (h *harness) releaseObserved(p *fakePub, i int) {
	h.t.Helper()
	p.mu.Lock()
	b := p.held[i]
	p.held = append(p.held[:i:i], p.held[i+1:]...)
	p.resolveLocked(b)
	p.mu.Unlock()
	select {
	case <-h.w.done.notify:
	case <-time.After(10 * time.Second):
		h.t.Fatal("the verdict never reached the writer")
	}
	h.w.poll(h.ctx)
}

func rejectBad(_ model.Topic, batch []*pubsub.Message) error {
	for _, m := range batch {
		if strings.HasPrefix(string(m.Data), "bad") {
			return status.Error(codes.InvalidArgument, "invalid message "+string(m.Data))
		}
	}
	return nil
}
