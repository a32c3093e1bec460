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
)

// useAdmin makes the prepare step use adm for the rest of the test.
func useAdmin(t *testing.T, adm admin) {
	t.Helper()
	prev := newAdmin
	newAdmin = func(context.Context, Config) (admin, error) { return adm, nil }
	t.Cleanup(func() { newAdmin = prev })
}

// The prepare DoFn emits the splits only after every seek, and none when
// the prepare step fails; it closes its client either way.
func TestPrepareFnEmitsSplitsOnlyAfterSeeking(t *testing.T) {
	subs := testSubs(2)
	adm := newFakeAdmin(existingSub(subs[0], nil), existingSub(subs[1], nil))
	useAdmin(t, adm)
	fn := &prepareFn{Plan: preparePlan(t, subs, func(c *Config) { c.Splits = 4 },
		SubscriptionSetup{Subscription: subs[0], Start: StartLatest()},
		SubscriptionSetup{Subscription: subs[1], Start: StartFromSnapshot("snap")})}
	emit := func(s Split) { adm.event(fmt.Sprintf("emit %d", s.Index)) }
	if err := fn.ProcessElement(context.Background(), nil, emit); err != nil {
		t.Fatalf("ProcessElement: %v", err)
	}
	calls := adm.calls()
	lastSeek := slices.IndexFunc(calls, func(c string) bool { return c == "seek "+subs[1].String() })
	firstEmit := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "emit ") })
	if adm.count("seek") != 2 || adm.count("emit") != 4 || lastSeek < 0 || firstEmit < lastSeek {
		t.Errorf("calls %q: want 2 seeks, then 4 splits emitted", calls)
	}
	if adm.closed != 1 {
		t.Errorf("admin closed %d times, want 1", adm.closed)
	}

	failing := newFakeAdmin(existingSub(subs[0], func(s *pubsubpb.Subscription) { s.EnableExactlyOnceDelivery = true }), existingSub(subs[1], nil))
	useAdmin(t, failing)
	fn.Plan.Cfg.MaxDurationPerAckExtension = 30 * time.Second
	err := fn.ProcessElement(context.Background(), nil, func(s Split) { failing.event(fmt.Sprintf("emit %d", s.Index)) })
	if err == nil || !strings.Contains(err.Error(), "exactly-once") {
		t.Fatalf("ProcessElement = %v, want the rejection", err)
	}
	if n := failing.count("emit") + failing.count("seek"); n != 0 || failing.closed != 1 {
		t.Errorf("after a rejection: calls %q, closed %d; want no seek, no split and the client closed", failing.calls(), failing.closed)
	}
}

// seekCountingAdmin is the production admin on pstest, except that seeks
// are recorded instead of sent: pstest crashes the process on a seek to a
// time.
type seekCountingAdmin struct {
	admin
	mu    sync.Mutex
	seeks []string
}

func (a *seekCountingAdmin) seek(_ context.Context, req *pubsubpb.SeekRequest) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seeks = append(a.seeks, req.GetSubscription())
	return nil
}

func (a *seekCountingAdmin) close() error { return nil } // the test's client outlives the run

// On Prism, a read whose splits resume many times (ten messages per bundle)
// seeks each subscription exactly once: the start position belongs to the
// job, not to a split. A missing subscription is created by the same run
// and read.
func TestStartPositionRunsOnceOnPrism(t *testing.T) {
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "once", 1)
	created := model.SubscriptionOf(testProject, "once-created")
	adm := &seekCountingAdmin{admin: &clientAdmin{client: f.client}}
	useAdmin(t, adm)

	// The created subscription exists before publishing, so it gets every
	// message too: create it through a first, empty prepare run.
	plan := preparePlan(t, []model.Subscription{subs[0], created}, func(c *Config) {
		c.Splits = 4
		c.MaxMessages = 100
		c.IdleTimeout = 5 * time.Second
		c.MaxRecordsPerBundle = 10
		c.Connection = f.conn
	},
		SubscriptionSetup{Subscription: subs[0], Start: StartLatest()},
		SubscriptionSetup{Subscription: created, Start: StartFromTimestamp(time.Now().Add(-time.Hour)),
			Create: SubscriptionCreateOptions{Topic: model.TopicOf(testProject, "once"), RetainAckedMessages: true}},
	)
	if _, err := prepare(context.Background(), adm, plan, time.Now); err != nil {
		t.Fatalf("creating the subscription: %v", err)
	}
	if got, err := f.client.SubscriptionAdminClient.GetSubscription(context.Background(),
		&pubsubpb.GetSubscriptionRequest{Subscription: created.String()}); err != nil || !got.GetRetainAckedMessages() || got.GetTopic() != topic {
		t.Fatalf("created subscription %v (%v), want one on %s retaining acked messages", got, err, topic)
	}
	adm.seeks = nil
	f.publish(t, topic, 100, nil)

	p, s := beam.NewPipelineWithRoot()
	passert.Count(s, Read(s, plan.Cfg), "messages", 200)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	slices.Sort(adm.seeks)
	if want := []string{subs[0].String(), created.String()}; !slices.Equal(adm.seeks, sorted(want)) {
		t.Errorf("seeks %q, want exactly one per subscription: %q", adm.seeks, want)
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
