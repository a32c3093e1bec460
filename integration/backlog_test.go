package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/monitoring"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// The backlog signal end to end: a Prism job reads the emulator with a
// fake Cloud Monitoring beside it (the emulator has none) and reports what
// Monitoring says about its subscription as gauges; when Monitoring fails,
// the read still reads everything and counts the failures.
func TestBacklogFromMonitoringBesideTheEmulator(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	mon, err := monitoring.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	const n, size = 300, 256

	t.Run("gauges", func(t *testing.T) {
		topic := e.CreateTopic(t, "backlog")
		sub := e.CreateSubscription(t, topic, "backlog", 30*time.Second)
		ids := e.Publish(t, topic, n, size, nil)
		mon.SetBacklog(sub, time.Now().Add(-time.Minute), n, n*size, 90*time.Second)

		res, bucket := runBacklogRead(t, e, mon, sub)
		wantAll(t, sub.ID, bucket, sub, ids)
		for name, want := range map[string]int64{
			"backlog_messages." + sub.String():      n,
			"backlog_bytes." + sub.String():         n * size,
			"oldest_unacked_age_ms." + sub.String(): 90_000,
		} {
			if got := gauge(res, name); got != want {
				t.Errorf("gauge pubsubio/%s = %d, want %d (what Monitoring said)", name, got, want)
			}
		}
		if got := counter(res, "backlog_samples"); got < 1 {
			t.Errorf("counter pubsubio/backlog_samples = %d, want at least 1", got)
		}
		asked := false
		for _, r := range mon.Requests() {
			asked = asked || r.GetName() == "projects/"+sub.Project && strings.Contains(r.GetFilter(), `"`+sub.ID+`"`)
		}
		if !asked {
			t.Errorf("Monitoring was never asked about %s; %d requests", sub, len(mon.Requests()))
		}
	})

	t.Run("monitoring down", func(t *testing.T) {
		mon.Fail(status.Error(codes.Unavailable, "monitoring is down"))
		defer mon.Fail(nil)
		topic := e.CreateTopic(t, "backlog-down")
		sub := e.CreateSubscription(t, topic, "backlog-down", 30*time.Second)
		ids := e.Publish(t, topic, n, size, nil)

		res, bucket := runBacklogRead(t, e, mon, sub)
		wantAll(t, sub.ID, bucket, sub, ids)
		if got := counter(res, "backlog_sample_failures"); got < 1 {
			t.Errorf("counter pubsubio/backlog_sample_failures = %d with Monitoring down, want at least 1", got)
		}
		if got := gauge(res, "backlog_messages."+sub.String()); got != 0 {
			t.Errorf("gauge pubsubio/backlog_messages = %d with Monitoring down, want none", got)
		}
	})
}

// runBacklogRead reads sub until it is idle, sampling its backlog from
// mon, and returns the job's metrics and the bucket of what it emitted
// (readInto).
func runBacklogRead(t *testing.T, e *emulator.Emulator, mon *monitoring.Server, sub pubsubio.Subscription) (beam.PipelineResult, string) {
	t.Helper()
	p, bucket := readInto(t, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{sub},
		IdleTimeout:   10 * time.Second,
		Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint, MonitoringEndpoint: mon.Addr},
	}, nil)
	ctx, cancel := runContext(3 * time.Minute)
	defer cancel()
	res, err := beamx.RunWithMetrics(ctx, p)
	if err != nil {
		t.Fatalf("the read of %s failed: %v", sub, err)
	}
	return res, bucket
}
