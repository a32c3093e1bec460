// Package backlog asks Cloud Monitoring for Pub/Sub subscriptions'
// backlog: how many messages and bytes are unacked, and how old the oldest
// is. Pub/Sub's data plane shows none of it; the service measures it every
// 60 s and publishes it as metrics, visible a minute or two later. The read
// (pubsubio/source, backlog.go) samples it through Client once a minute.
package backlog

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	monitoring "cloud.google.com/go/monitoring/apiv3/v2"
	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The metrics a Sample holds, as Cloud Monitoring names them.
const (
	MetricMessages  = "pubsub.googleapis.com/subscription/num_undelivered_messages"
	MetricBytes     = "pubsub.googleapis.com/subscription/backlog_bytes"
	MetricOldestAge = "pubsub.googleapis.com/subscription/oldest_unacked_message_age" // seconds
)

// Metrics are the metric types Client asks for, in the order it asks.
var Metrics = []string{MetricMessages, MetricBytes, MetricOldestAge}

// ResourceType is the monitored resource of a subscription's metrics.
const ResourceType = "pubsub_subscription"

// Lookback is how far back a sample looks for each metric's latest point:
// the service writes one a minute and shows it up to about four minutes
// later, so a subscription with no point in that span has none to give.
const Lookback = 5 * time.Minute

// BatchSize is how many subscriptions of one project one ListTimeSeries
// call names (one_of in its filter), so that a thousand subscriptions cost
// tens of calls, not thousands.
const BatchSize = 100

// Point is a metric's latest value and when the service measured it.
type Point struct {
	Value int64
	// At is when the service measured Value; zero if it had no point
	// within Lookback.
	At time.Time
}

// Known reports whether p holds a measurement.
func (p Point) Known() bool { return !p.At.IsZero() }

// Sample is what Cloud Monitoring last measured of one subscription.
type Sample struct {
	Messages  Point // num_undelivered_messages
	Bytes     Point // backlog_bytes
	OldestAge Point // oldest_unacked_message_age, in seconds
}

// Known reports whether s holds any measurement.
func (s Sample) Known() bool {
	return s.Messages.Known() || s.Bytes.Known() || s.OldestAge.Known()
}

// OldestPublished is when the subscription's oldest unacked message was
// published, as the service last saw it, if it knows.
func (s Sample) OldestPublished() (time.Time, bool) {
	if !s.OldestAge.Known() {
		return time.Time{}, false
	}
	return s.OldestAge.At.Add(-time.Duration(s.OldestAge.Value) * time.Second), true
}

// Client samples subscriptions' backlog from Cloud Monitoring.
type Client struct {
	metrics *monitoring.MetricClient
	timeout time.Duration
	target  string
}

// NewClient connects to the Cloud Monitoring that s names
// (connection.DialMonitoring); each call is bounded by s.CallTimeout().
// extra dial options are added to the connection.
func NewClient(ctx context.Context, s connection.Settings, extra ...grpc.DialOption) (*Client, error) {
	conn, err := connection.DialMonitoring(ctx, s, extra...)
	if err != nil {
		return nil, err
	}
	mc, err := monitoring.NewMetricClient(ctx, option.WithGRPCConn(conn))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("creating the Cloud Monitoring client for %s: %w", s.MonitoringTarget(), err)
	}
	// No retries within a call: the client's default retries Unavailable
	// until its deadline, which would hold a round for RPCTimeout, and the
	// next round comes a minute later anyway.
	mc.CallOptions.ListTimeSeries = nil
	return &Client{metrics: mc, timeout: s.CallTimeout(), target: s.MonitoringTarget()}, nil
}

// Close closes the client and its connection.
func (c *Client) Close() error { return c.metrics.Close() }

// Sample returns what Cloud Monitoring measured of subs within Lookback
// before now: one ListTimeSeries call per metric per BatchSize
// subscriptions of a project. A subscription without any point is left
// out. It stops at the first call that fails, returning what it had and
// the error.
func (c *Client) Sample(ctx context.Context, subs []model.Subscription, now time.Time) (map[model.Subscription]Sample, error) {
	out := map[model.Subscription]Sample{}
	for _, batch := range batches(subs) {
		for _, metric := range Metrics {
			if err := c.list(ctx, batch, metric, now, out); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// batches groups subs by project, at most BatchSize to a group, in a
// stable order.
func batches(subs []model.Subscription) [][]model.Subscription {
	byProject := map[string][]model.Subscription{}
	for _, s := range subs {
		byProject[s.Project] = append(byProject[s.Project], s)
	}
	projects := make([]string, 0, len(byProject))
	for p := range byProject {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	var out [][]model.Subscription
	for _, p := range projects {
		ss := byProject[p]
		for len(ss) > 0 {
			n := min(len(ss), BatchSize)
			out = append(out, ss[:n])
			ss = ss[n:]
		}
	}
	return out
}

// Filter is the ListTimeSeries filter for metric of the subscriptions ids
// of one project.
func Filter(metric string, ids []string) string {
	quoted := make([]string, len(ids))
	for i, id := range ids {
		// Subscription IDs hold letters, digits and -._~+%, never a quote.
		quoted[i] = `"` + id + `"`
	}
	return fmt.Sprintf(`metric.type = %q AND resource.type = %q AND resource.labels.subscription_id = one_of(%s)`,
		metric, ResourceType, strings.Join(quoted, ", "))
}

// list asks for metric of batch (one project's) and records each
// subscription's latest point in out.
func (c *Client) list(ctx context.Context, batch []model.Subscription, metric string, now time.Time, out map[model.Subscription]Sample) error {
	project := batch[0].Project
	ids := make([]string, len(batch))
	for i, s := range batch {
		ids[i] = s.ID
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	it := c.metrics.ListTimeSeries(ctx, &monitoringpb.ListTimeSeriesRequest{
		Name:   "projects/" + project,
		Filter: Filter(metric, ids),
		Interval: &monitoringpb.TimeInterval{
			StartTime: timestamppb.New(now.Add(-Lookback)),
			EndTime:   timestamppb.New(now),
		},
		View: monitoringpb.ListTimeSeriesRequest_FULL,
	})
	for {
		ts, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("ListTimeSeries %s of %d subscriptions of project %s at %s: %w", metric, len(batch), project, c.target, err)
		}
		sub := model.Subscription{Project: project, ID: ts.GetResource().GetLabels()["subscription_id"]}
		p, ok := latest(ts.GetPoints())
		if !ok {
			continue
		}
		s := out[sub]
		switch metric {
		case MetricMessages:
			s.Messages = p
		case MetricBytes:
			s.Bytes = p
		case MetricOldestAge:
			s.OldestAge = p
		}
		out[sub] = s
	}
}

// latest returns the latest of points (the service lists them newest
// first, but nothing depends on it).
func latest(points []*monitoringpb.Point) (Point, bool) {
	var best Point
	for _, pt := range points {
		at := pt.GetInterval().GetEndTime().AsTime()
		if pt.GetInterval().GetEndTime() == nil || !at.After(best.At) {
			continue
		}
		v := pt.GetValue()
		switch v.GetValue().(type) {
		case *monitoringpb.TypedValue_Int64Value:
			best = Point{Value: v.GetInt64Value(), At: at}
		case *monitoringpb.TypedValue_DoubleValue:
			best = Point{Value: int64(v.GetDoubleValue()), At: at}
		}
	}
	return best, best.Known()
}
