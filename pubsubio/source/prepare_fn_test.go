package source

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

// useAdmin makes the prepare step and the cleanup use adm for the rest of
// the test.
func useAdmin(t *testing.T, adm prepare.Admin) {
	t.Helper()
	prev := newAdmin
	newAdmin = func(context.Context, string, connection.Settings) (prepare.Admin, error) { return adm, nil }
	t.Cleanup(func() { newAdmin = prev })
}

// recordingAdmin is the production admin on pstest, except that seeks are
// recorded instead of sent (pstest crashes the process on a seek to a
// time); the test's emits are recorded beside them, and closing is
// counted.
type recordingAdmin struct {
	prepare.Admin
	mu     sync.Mutex
	calls  []string
	closed int
}

// newRecordingAdmin connects to f; the test closes the client, which
// outlives every run.
func newRecordingAdmin(t *testing.T, f *fakeServer) *recordingAdmin {
	t.Helper()
	adm, err := prepare.Dial(context.Background(), testProject, f.conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	return &recordingAdmin{Admin: adm}
}

func (a *recordingAdmin) record(call string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, call)
}

func (a *recordingAdmin) recorded() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

func (a *recordingAdmin) Seek(_ context.Context, req *pubsubpb.SeekRequest) error {
	a.record("seek " + req.GetSubscription())
	return nil
}

func (a *recordingAdmin) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed++
	return nil
}

// The prepare DoFn emits the splits only after every seek, and none when
// the prepare step fails; it closes its client either way.
func TestPrepareFnEmitsSplitsOnlyAfterSeeking(t *testing.T) {
	f := newFakeServer(t)
	_, subs := f.topicWithSubs(t, "emits", 2)
	adm := newRecordingAdmin(t, f)
	useAdmin(t, adm)
	fn := &prepareFn{Plan: testPlan(t, func(c *Config) {
		c.Subscriptions, c.Splits, c.Connection = subs, 4, f.conn
		c.Setup = []SubscriptionSetup{{Subscription: subs[0], Start: StartLatest()}, {Subscription: subs[1], Start: StartFromSnapshot("snap")}}
	})}
	emit := func(s Split) { adm.record(fmt.Sprintf("emit %d", s.Index)) }
	if err := fn.ProcessElement(context.Background(), nil, emit); err != nil {
		t.Fatalf("ProcessElement: %v", err)
	}
	want := []string{"seek " + subs[0].String(), "seek " + subs[1].String(), "emit 0", "emit 1", "emit 2", "emit 3"}
	if got := adm.recorded(); !slices.Equal(got, want) || adm.closed != 1 {
		t.Errorf("calls %q, closed %d; want %q and the client closed once", got, adm.closed, want)
	}

	// A rejection: DecodePolicy NACK needs a dead-letter policy, which
	// neither subscription has.
	failing := newRecordingAdmin(t, f)
	useAdmin(t, failing)
	fn.Plan.Cfg.DecodePolicy = model.DecodeNack
	err := fn.ProcessElement(context.Background(), nil, func(s Split) { failing.record(fmt.Sprintf("emit %d", s.Index)) })
	if err == nil || !strings.Contains(err.Error(), "no dead-letter policy") {
		t.Fatalf("ProcessElement = %v, want the rejection", err)
	}
	if got := failing.recorded(); len(got) != 0 || failing.closed != 1 {
		t.Errorf("after a rejection: calls %q, closed %d; want no seek, no split and the client closed", got, failing.closed)
	}
}

// On Prism, a read whose splits resume many times (ten messages per bundle)
// seeks each subscription exactly once: the start position belongs to the
// job, not to a split. A missing subscription is created by the same run
// and read.
func TestStartPositionRunsOnceOnPrism(t *testing.T) {
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "once", 1)
	created := model.SubscriptionOf(testProject, "once-created")
	adm := newRecordingAdmin(t, f)
	useAdmin(t, adm)

	// The created subscription exists before publishing, so it gets every
	// message too: create it through a first, empty prepare run.
	plan := testPlan(t, func(c *Config) {
		c.Subscriptions = []model.Subscription{subs[0], created}
		c.Splits = 4
		c.MaxMessages = 100
		c.IdleTimeout = 5 * time.Second
		c.MaxRecordsPerBundle = 10
		c.Connection = f.conn
		c.Setup = []SubscriptionSetup{
			{Subscription: subs[0], Start: StartLatest()},
			{Subscription: created, Start: StartFromTimestamp(time.Now().Add(-time.Hour)),
				Create: SubscriptionCreateOptions{Topic: model.TopicOf(testProject, "once"), RetainAckedMessages: true}},
		}
	})
	if _, err := prepare.Run(context.Background(), adm, plan.job(), time.Now); err != nil {
		t.Fatalf("creating the subscription: %v", err)
	}
	if got, err := f.client.SubscriptionAdminClient.GetSubscription(context.Background(),
		&pubsubpb.GetSubscriptionRequest{Subscription: created.String()}); err != nil || !got.GetRetainAckedMessages() || got.GetTopic() != topic {
		t.Fatalf("created subscription %v (%v), want one on %s retaining acked messages", got, err, topic)
	}
	adm = newRecordingAdmin(t, f)
	useAdmin(t, adm)
	f.publish(t, topic, 100, nil)

	p, s := beam.NewPipelineWithRoot()
	passert.Count(s, Read(s, plan.Cfg), "messages", 200)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	seeks := sorted(adm.recorded())
	if want := sorted([]string{"seek " + subs[0].String(), "seek " + created.String()}); !slices.Equal(seeks, want) {
		t.Errorf("calls %q, want exactly one seek per subscription: %q", seeks, want)
	}
	counters := map[string]int64{}
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == metrics.Namespace {
			counters[c.Name()] += c.Result()
		}
	}
	if counters["seeks_performed"] != 2 || counters["subscriptions_created"] != 0 || counters["checks_rejected"] != 0 {
		t.Errorf("metrics %v: want seeks_performed 2, subscriptions_created 0 (it existed), checks_rejected 0", counters)
	}
	// Prove the splits resumed: many bundles per split, far more than seeks.
	if got := counters["acks_via_resume"]; got < 200 {
		t.Errorf("acks_via_resume %d, want every message acked by a resumed bundle", got)
	}
}

// A read whose endpoint refuses every connection (a port typo) fails the
// job within Connection.RPCTimeout, naming the call and the endpoint,
// instead of retrying forever.
func TestReadOfAnEndpointThatNeverAnswersFailsOnPrism(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now: every connection is refused
	p, s := beam.NewPipelineWithRoot()
	Read(s, Config{
		Subscriptions: []model.Subscription{model.SubscriptionOf(testProject, "typo")},
		IdleTimeout:   time.Second,
		Connection:    connection.Settings{EmulatorEndpoint: dead, RPCTimeout: 2 * time.Second},
	})
	errc := make(chan error, 1)
	go func() { errc <- ptest.Run(p) }()
	select {
	case err = <-errc:
	case <-time.After(3 * time.Minute):
		t.Fatal("the read of an endpoint nothing listens on did not fail within 3m")
	}
	for _, want := range []string{"GetSubscription projects/" + testProject + "/subscriptions/typo", "at " + dead, "no answer within"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("pipeline error %v does not contain %q", err, want)
		}
	}
}
