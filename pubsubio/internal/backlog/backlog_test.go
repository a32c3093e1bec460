package backlog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/monitoring"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/backlog"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// newServer starts a fake Cloud Monitoring and a client of it with
// rpcTimeout (0: the default).
func newServer(t *testing.T, rpcTimeout time.Duration) (*monitoring.Server, *backlog.Client) {
	t.Helper()
	srv, err := monitoring.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	// The emulator endpoint is never dialled by the backlog client.
	c, err := backlog.NewClient(context.Background(), connection.Settings{EmulatorEndpoint: "127.0.0.1:1", MonitoringEndpoint: srv.Addr, RPCTimeout: rpcTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestSampleTakesEachMetricsLatestPoint(t *testing.T) {
	srv, c := newServer(t, 0)
	a, b, quiet := model.Subscription{Project: "p", ID: "a"}, model.Subscription{Project: "p", ID: "b"}, model.Subscription{Project: "p", ID: "quiet"}
	srv.Add(a, backlog.MetricMessages, now.Add(-3*time.Minute), 10)
	srv.SetBacklog(a, now.Add(-2*time.Minute), 12, 12000, 90*time.Second)
	// b has only a message count, and one beyond the lookback.
	srv.Add(b, backlog.MetricMessages, now.Add(-time.Minute), 1)
	srv.Add(b, backlog.MetricMessages, now.Add(-backlog.Lookback-time.Second), 99)
	srv.Add(quiet, backlog.MetricMessages, now.Add(-backlog.Lookback-time.Second), 5)

	got, err := c.Sample(context.Background(), []model.Subscription{a, b, quiet}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[model.Subscription]backlog.Sample{
		a: {
			Messages:  backlog.Point{Value: 12, At: now.Add(-2 * time.Minute)},
			Bytes:     backlog.Point{Value: 12000, At: now.Add(-2 * time.Minute)},
			OldestAge: backlog.Point{Value: 90, At: now.Add(-2 * time.Minute)},
		},
		b: {Messages: backlog.Point{Value: 1, At: now.Add(-time.Minute)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sample (-want +got):\n%s", diff)
	}
	if p, ok := got[a].OldestPublished(); !ok || !p.Equal(now.Add(-2*time.Minute-90*time.Second)) {
		t.Errorf("OldestPublished = %v, %v; want the sample's time minus 90 s", p, ok)
	}
	if _, ok := got[b].OldestPublished(); ok {
		t.Error("OldestPublished of a sample without the age: want none")
	}
	reqs := srv.Requests()
	if len(reqs) != len(backlog.Metrics) {
		t.Fatalf("%d calls for one project's 3 subscriptions, want one per metric (%d)", len(reqs), len(backlog.Metrics))
	}
	for i, r := range reqs {
		if r.GetName() != "projects/p" || r.GetFilter() != backlog.Filter(backlog.Metrics[i], []string{"a", "b", "quiet"}) {
			t.Errorf("call %d: name %q filter %q", i, r.GetName(), r.GetFilter())
		}
		if from, to := r.GetInterval().GetStartTime().AsTime(), r.GetInterval().GetEndTime().AsTime(); !to.Equal(now) || !from.Equal(now.Add(-backlog.Lookback)) {
			t.Errorf("call %d: interval %v..%v, want the %v before now", i, from, to, backlog.Lookback)
		}
	}
}

// A thousand subscriptions of one project, and one of another, cost one
// call per metric per BatchSize subscriptions of a project, and every
// subscription is asked for once per metric.
func TestSampleBatchesByProject(t *testing.T) {
	srv, c := newServer(t, 0)
	var subs []model.Subscription
	for i := range 1000 {
		subs = append(subs, model.Subscription{Project: "big", ID: fmt.Sprintf("s-%04d", i)})
	}
	subs = append(subs, model.Subscription{Project: "small", ID: "only"})
	for _, s := range subs {
		srv.Add(s, backlog.MetricMessages, now.Add(-time.Minute), 1)
	}
	got, err := c.Sample(context.Background(), subs, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(subs) {
		t.Errorf("%d subscriptions sampled, want %d", len(got), len(subs))
	}
	reqs := srv.Requests()
	if want := len(backlog.Metrics) * (1000/backlog.BatchSize + 1); len(reqs) != want {
		t.Errorf("%d calls, want %d", len(reqs), want)
	}
	asked := map[string]int{}
	for _, r := range reqs {
		ids := strings.Count(r.GetFilter(), `", "`) + 1
		if ids > backlog.BatchSize {
			t.Errorf("a call names %d subscriptions, over BatchSize %d", ids, backlog.BatchSize)
		}
		asked[r.GetName()] += ids
	}
	if want := map[string]int{"projects/big": 3000, "projects/small": 3}; !cmp.Equal(asked, want) {
		t.Errorf("subscriptions asked for per project %v, want %v", asked, want)
	}
}

// A failing Cloud Monitoring: the first failed call ends the sample, is
// not retried (Unavailable neither, which the client's defaults retry
// until the deadline), and the error names the call, the project and the
// endpoint.
func TestSampleStopsAtTheFirstFailure(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unavailable} {
		srv, c := newServer(t, 0)
		srv.Fail(status.Error(code, "monitoring.timeSeries.list failed"))
		subs := []model.Subscription{{Project: "p", ID: "a"}, {Project: "q", ID: "b"}}
		got, err := c.Sample(context.Background(), subs, now)
		if status.Code(err) != code {
			t.Fatalf("Sample error = %v, want %v", err, code)
		}
		for _, w := range []string{"ListTimeSeries", backlog.MetricMessages, "project p", srv.Addr} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not name %q", code, err, w)
			}
		}
		if len(got) != 0 || len(srv.Requests()) != 1 {
			t.Errorf("%v: %d samples after %d calls, want none after one", code, len(got), len(srv.Requests()))
		}
	}
}

// A Cloud Monitoring that does not answer: each call ends at RPCTimeout.
func TestSampleIsBoundedByRPCTimeout(t *testing.T) {
	srv, c := newServer(t, time.Second)
	srv.Delay(time.Hour)
	_, err := c.Sample(context.Background(), []model.Subscription{{Project: "p", ID: "a"}}, now)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Sample error = %v, want DeadlineExceeded after RPCTimeout", err)
	}
}

// A Cloud Monitoring that knows nothing of the subscriptions: no sample,
// no error.
func TestSampleOfUnknownSubscriptionsIsEmpty(t *testing.T) {
	_, c := newServer(t, 0)
	got, err := c.Sample(context.Background(), []model.Subscription{{Project: "p", ID: "a"}}, now)
	if err != nil || len(got) != 0 {
		t.Fatalf("Sample = %v, %v; want nothing and no error", got, err)
	}
}
