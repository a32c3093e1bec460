// Package backlogtest is an in-process Cloud Monitoring for tests and
// benchmarks: a gRPC server of the real MetricService API whose
// ListTimeSeries answers from scripted series of Pub/Sub's subscription
// metrics, and can be made to fail, to be slow or to know nothing.
package backlogtest

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

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/backlog"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Server is a running fake Cloud Monitoring. Safe for concurrent use.
type Server struct {
	// Addr is its host:port, for connection.Settings.MonitoringEndpoint.
	Addr string

	monitoringpb.UnimplementedMetricServiceServer
	grpc *grpc.Server

	mu       sync.Mutex
	series   map[seriesKey][]backlog.Point // newest first
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
		return nil, fmt.Errorf("backlogtest: %w", err)
	}
	s := &Server{Addr: lis.Addr().String(), grpc: grpc.NewServer(), series: map[seriesKey][]backlog.Point{}}
	monitoringpb.RegisterMetricServiceServer(s.grpc, s)
	go s.grpc.Serve(lis)
	return s, nil
}

// Close stops the server, ending the calls it is answering.
func (s *Server) Close() { s.grpc.Stop() }

// Add records points of metric (one of backlog.Metrics) for sub.
func (s *Server) Add(sub model.Subscription, metric string, points ...backlog.Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := seriesKey{sub, metric}
	s.series[k] = append(s.series[k], points...)
	sort.Slice(s.series[k], func(i, j int) bool { return s.series[k][i].At.After(s.series[k][j].At) })
}

// AddSample records the three metrics of sample for sub; those it does not
// know are left out.
func (s *Server) AddSample(sub model.Subscription, sample backlog.Sample) {
	for metric, p := range map[string]backlog.Point{
		backlog.MetricMessages: sample.Messages, backlog.MetricBytes: sample.Bytes, backlog.MetricOldestAge: sample.OldestAge,
	} {
		if p.Known() {
			s.Add(sub, metric, p)
		}
	}
}

// Reset forgets every series.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.series = map[seriesKey][]backlog.Point{}
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

// filterRE is the only filter shape the server understands, the one
// backlog.Filter writes: a client that drifts from it is told so.
var filterRE = regexp.MustCompile(`^metric\.type = "([^"]+)" AND resource\.type = "` + backlog.ResourceType + `" AND resource\.labels\.subscription_id = one_of\(("[^"]*"(?:, "[^"]*")*)\)$`)

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
		return nil, status.Errorf(codes.InvalidArgument, "backlogtest does not understand the filter %q", req.GetFilter())
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
			if p.At.Before(from) || p.At.After(to) {
				continue
			}
			at := timestamppb.New(p.At)
			points = append(points, &monitoringpb.Point{
				Interval: &monitoringpb.TimeInterval{StartTime: at, EndTime: at},
				Value:    &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: p.Value}},
			})
		}
		if len(points) == 0 {
			continue
		}
		resp.TimeSeries = append(resp.TimeSeries, &monitoringpb.TimeSeries{
			Metric:     &metric.Metric{Type: metricType},
			Resource:   &monitoredres.MonitoredResource{Type: backlog.ResourceType, Labels: map[string]string{"project_id": project, "subscription_id": sub.ID}},
			MetricKind: metric.MetricDescriptor_GAUGE,
			ValueType:  metric.MetricDescriptor_INT64,
			Points:     points,
		})
	}
	return resp, nil
}
