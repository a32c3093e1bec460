package sample

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// Jobs reads the live metrics of jobs on the Prism job server this process
// runs pipelines on. Beam metrics reach a PipelineResult only when a
// pipeline returns, which an unbounded read never does on its own; the job
// server has them while the job runs (Prism aggregates them from every
// finished bundle).
type Jobs struct {
	conn   *grpc.ClientConn
	client jobpb.JobServiceClient
}

// ConnectJobs connects to the job server at the -endpoint flag, which Beam's
// Prism runner sets when it starts its in-process server on the first
// beamx.Run of the process. Call it once a pipeline has been submitted.
func ConnectJobs() (*Jobs, error) {
	ep := *jobopts.Endpoint
	if ep == "" {
		return nil, fmt.Errorf("sample: no job server endpoint: submit a pipeline on Prism (beamx.Run) before reading its metrics")
	}
	conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("sample: connecting to the job server at %s: %w", ep, err)
	}
	return &Jobs{conn: conn, client: jobpb.NewJobServiceClient(conn)}, nil
}

// Close closes the connection to the job server.
func (j *Jobs) Close() error { return j.conn.Close() }

// Cancel cancels the running job jobID if it is named name, and reports
// whether it did: job IDs repeat across the job servers of a process and
// its children, so the name tells the job.
func (j *Jobs) Cancel(ctx context.Context, jobID, name string) (bool, error) {
	res, err := j.client.GetJobs(ctx, &jobpb.GetJobsRequest{})
	if err != nil {
		return false, fmt.Errorf("sample: listing jobs: %w", err)
	}
	for _, info := range res.GetJobInfo() {
		if info.GetJobId() == jobID && info.GetJobName() == name && info.GetState() == jobpb.JobState_RUNNING {
			_, err := j.client.Cancel(ctx, &jobpb.CancelJobRequest{JobId: jobID})
			return err == nil, err
		}
	}
	return false, nil
}

// Running returns the IDs of the running jobs whose pipeline mentions
// marker, sorted: the ID of a topic or subscription of the job's own tells
// it from the jobs other tests run on the same job server meanwhile.
func (j *Jobs) Running(ctx context.Context, marker string) ([]string, error) {
	res, err := j.client.GetJobs(ctx, &jobpb.GetJobsRequest{})
	if err != nil {
		return nil, fmt.Errorf("sample: listing jobs: %w", err)
	}
	var ids []string
	for _, info := range res.GetJobInfo() {
		if info.GetState() != jobpb.JobState_RUNNING {
			continue
		}
		p, err := j.client.GetPipeline(ctx, &jobpb.GetJobPipelineRequest{JobId: info.GetJobId()})
		if err != nil {
			return nil, fmt.Errorf("sample: pipeline of job %s: %w", info.GetJobId(), err)
		}
		if mentions(p.GetPipeline(), marker) {
			ids = append(ids, info.GetJobId())
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// mentions reports whether a DoFn of p has marker among its fields, which
// Beam Go encodes in base64 within each ParDo's payload.
func mentions(p *pipepb.Pipeline, marker string) bool {
	for _, t := range p.GetComponents().GetTransforms() {
		if t.GetSpec().GetUrn() != "beam:transform:pardo:v1" {
			continue
		}
		var pardo pipepb.ParDoPayload
		if proto.Unmarshal(t.GetSpec().GetPayload(), &pardo) != nil {
			continue
		}
		fn, err := base64.StdEncoding.DecodeString(string(pardo.GetDoFn().GetPayload()))
		if err == nil && bytes.Contains(fn, []byte(marker)) {
			return true
		}
	}
	return false
}

// Metrics returns a job's user metrics in namespace, by name, summed over
// steps: counters over the bundles that finished (Prism files a finished
// bundle's metrics as committed, and only in-progress reports as
// attempted), gauges at the latest in-progress report.
func (j *Jobs) Metrics(ctx context.Context, jobID, namespace string) (map[string]int64, error) {
	res, err := j.client.GetJobMetrics(ctx, &jobpb.GetJobMetricsRequest{JobId: jobID})
	if err != nil {
		return nil, fmt.Errorf("sample: metrics of job %s: %w", jobID, err)
	}
	m := res.GetMetrics()
	all := metricsx.FromMonitoringInfos(nil, m.GetAttempted(), m.GetCommitted()).AllMetrics()
	out := map[string]int64{}
	for _, c := range all.Counters() {
		if c.Namespace() == namespace {
			out[c.Name()] += c.Committed
		}
	}
	for _, g := range all.Gauges() {
		if g.Namespace() == namespace {
			out[g.Name()] += g.Attempted.Value
		}
	}
	return out, nil
}
