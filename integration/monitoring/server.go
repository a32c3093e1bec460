// Package monitoring is an in-process Cloud Monitoring for tests and
// benchmarks: a gRPC server of the real MetricService API whose
// ListTimeSeries answers from scripted series of Pub/Sub's subscription
// metrics, and can be made to fail, to be slow or to know nothing. It
// names the metrics and the filter as the service documents them, not
// as the read writes them, so a read that drifts from the service is
// told so.
package monitoring

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"google.golang.org/genproto/googleapis/api/metric"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Pub/Sub's subscription metrics, as Cloud Monitoring names them.
const (
	MetricMessages  = "pubsub.googleapis.com/subscription/num_undelivered_messages"
	MetricBytes     = "pubsub.googleapis.com/subscription/backlog_bytes"
	MetricOldestAge = "pubsub.googleapis.com/subscription/oldest_unacked_message_age" // seconds
)

// resourceType is the monitored resource of a subscription's metrics.
const resourceType = "pubsub_subscription"

// point is one measurement of a metric.
type point struct {
	at    time.Time
	value int64
}

// Server is a running fake Cloud Monitoring. Safe for concurrent use.
type Server struct {
	// Addr is its host:port, for connection.Settings.MonitoringEndpoint.
	Addr string

	monitoringpb.UnimplementedMetricServiceServer
	grpc *grpc.Server

	mu       sync.Mutex
	series   map[seriesKey][]point // newest first
	err      error
	delay    time.Duration
	requests []*monitoringpb.ListTimeSeriesRequest
}

type seriesKey struct {
	sub    model.Subscription
	metric string
}

// NewServer starts a server on a free port of 127.0.0.1; Close stops it.
func NewServer() (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("monitoring: %w", err)
	}
	s := &Server{Addr: lis.Addr().String(), grpc: grpc.NewServer(), series: map[seriesKey][]point{}}
	monitoringpb.RegisterMetricServiceServer(s.grpc, s)
	go s.grpc.Serve(lis)
	return s, nil
}

// Close stops the server, ending the calls it is answering.
func (s *Server) Close() { s.grpc.Stop() }

// Add records that the service measured value for metric (one of the
// Metric constants) of sub at at.
func (s *Server) Add(sub model.Subscription, metric string, at time.Time, value int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := seriesKey{sub, metric}
	s.series[k] = append(s.series[k], point{at: at, value: value})
	sort.Slice(s.series[k], func(i, j int) bool { return s.series[k][i].at.After(s.series[k][j].at) })
}

// SetBacklog records a measurement at at of the three metrics of sub: its
// unacked messages and bytes, and the age of its oldest unacked message
// (whole seconds, as the service reports it).
func (s *Server) SetBacklog(sub model.Subscription, at time.Time, messages, bytes int64, oldestAge time.Duration) {
	s.Add(sub, MetricMessages, at, messages)
	s.Add(sub, MetricBytes, at, bytes)
	s.Add(sub, MetricOldestAge, at, int64(oldestAge/time.Second))
}

// Reset forgets every series.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.series = map[seriesKey][]point{}
}

// Fail makes every call return err; nil answers again.
func (s *Server) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Delay makes every call wait d (or until its caller gives up) before it
// answers.
func (s *Server) Delay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Requests returns the ListTimeSeries requests received so far.
func (s *Server) Requests() []*monitoringpb.ListTimeSeriesRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*monitoringpb.ListTimeSeriesRequest(nil), s.requests...)
}

// filterRE is the only filter shape the server understands: one metric of
// a list of subscriptions, in the service's filter syntax. A client that
// writes another is told so.
var filterRE = regexp.MustCompile(`^metric\.type = "([^"]+)" AND resource\.type = "` + resourceType + `" AND resource\.labels\.subscription_id = one_of\(("[^"]*"(?:, "[^"]*")*)\)$`)

// ListTimeSeries answers with each named subscription's series of the
// filter's metric, its points within the request's interval, newest
// first, as the service does; a subscription without one is left out.
func (s *Server) ListTimeSeries(ctx context.Context, req *monitoringpb.ListTimeSeriesRequest) (*monitoringpb.ListTimeSeriesResponse, error) {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	err, delay := s.err, s.delay
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if err != nil {
		return nil, err
	}
	project, ok := strings.CutPrefix(req.GetName(), "projects/")
	if !ok || project == "" || strings.Contains(project, "/") {
		return nil, status.Errorf(codes.InvalidArgument, "name %q is not projects/PROJECT", req.GetName())
	}
	m := filterRE.FindStringSubmatch(req.GetFilter())
	if m == nil {
		return nil, status.Errorf(codes.InvalidArgument, "the fake Monitoring does not understand the filter %q", req.GetFilter())
	}
	iv := req.GetInterval()
	if iv.GetEndTime() == nil || iv.GetStartTime() == nil || iv.GetStartTime().AsTime().After(iv.GetEndTime().AsTime()) {
		return nil, status.Errorf(codes.InvalidArgument, "interval %v is not a start time before an end time", iv)
	}
	from, to := iv.GetStartTime().AsTime(), iv.GetEndTime().AsTime()
	metricType := m[1]
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &monitoringpb.ListTimeSeriesResponse{}
	for _, q := range strings.Split(m[2], ", ") {
		sub := model.Subscription{Project: project, ID: strings.Trim(q, `"`)}
		var points []*monitoringpb.Point
		for _, p := range s.series[seriesKey{sub, metricType}] {
			if p.at.Before(from) || p.at.After(to) {
				continue
			}
			at := timestamppb.New(p.at)
			points = append(points, &monitoringpb.Point{
				Interval: &monitoringpb.TimeInterval{StartTime: at, EndTime: at},
				Value:    &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: p.value}},
			})
		}
		if len(points) == 0 {
			continue
		}
		resp.TimeSeries = append(resp.TimeSeries, &monitoringpb.TimeSeries{
			Metric:     &metric.Metric{Type: metricType},
			Resource:   &monitoredres.MonitoredResource{Type: resourceType, Labels: map[string]string{"project_id": project, "subscription_id": sub.ID}},
			MetricKind: metric.MetricDescriptor_GAUGE,
			ValueType:  metric.MetricDescriptor_INT64,
			Points:     points,
		})
	}
	return resp, nil
}
