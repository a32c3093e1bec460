package flink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// REST is a small client of the JobManager's REST API.
type REST struct {
	Addr   string // host:port
	client *http.Client
}

// NewREST returns a client of the REST API at addr (host:port).
func NewREST(addr string) *REST {
	return &REST{Addr: addr, client: &http.Client{Timeout: 10 * time.Second}}
}

// do sends body (nil for none) as JSON and decodes the answer into v
// (nil to ignore it).
func (r *REST) do(ctx context.Context, method, path string, body, v any) error {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("flink REST %s %s: %w", method, path, err)
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+r.Addr+path, in)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("flink REST %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("flink REST %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("flink REST %s %s: %s: %s", method, path, resp.Status, tail(string(answer), 2000))
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(answer, v); err != nil {
		return fmt.Errorf("flink REST %s %s: %w in %s", method, path, err, tail(string(answer), 2000))
	}
	return nil
}

// Overview is GET /overview.
type Overview struct {
	TaskManagers   int    `json:"taskmanagers"`
	SlotsTotal     int    `json:"slots-total"`
	SlotsAvailable int    `json:"slots-available"`
	JobsRunning    int    `json:"jobs-running"`
	FlinkVersion   string `json:"flink-version"`
}

// Overview returns the cluster overview.
func (r *REST) Overview(ctx context.Context) (Overview, error) {
	var o Overview
	err := r.do(ctx, http.MethodGet, "/overview", nil, &o)
	return o, err
}

// Job is one entry of GET /jobs/overview.
type Job struct {
	ID        string `json:"jid"`
	Name      string `json:"name"`
	State     string `json:"state"`
	StartTime int64  `json:"start-time"` // Unix ms
	EndTime   int64  `json:"end-time"`   // Unix ms, -1 while it runs
}

// Jobs lists the jobs the JobManager knows.
func (r *REST) Jobs(ctx context.Context) ([]Job, error) {
	var resp struct {
		Jobs []Job `json:"jobs"`
	}
	err := r.do(ctx, http.MethodGet, "/jobs/overview", nil, &resp)
	return resp.Jobs, err
}

// AwaitRunningJob polls until a job is RUNNING and returns it. With the
// embedded mini cluster the REST API exists only while a job runs, so
// errors are retried until ctx ends.
func (r *REST) AwaitRunningJob(ctx context.Context) (Job, error) {
	var last error
	for {
		jobs, err := r.Jobs(ctx)
		if err == nil {
			for _, j := range jobs {
				if j.State == "RUNNING" {
					return j, nil
				}
			}
			last = fmt.Errorf("no RUNNING job among %d", len(jobs))
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return Job{}, fmt.Errorf("flink REST %s: no running job: %w", r.Addr, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Cancel cancels a job.
func (r *REST) Cancel(ctx context.Context, jobID string) error {
	return r.do(ctx, http.MethodPatch, "/jobs/"+jobID+"?mode=cancel", nil, nil)
}

// vertex is one of a job's vertices.
type vertex struct {
	ID string `json:"id"`
}

// vertices lists the vertices of job jobID.
func (r *REST) vertices(ctx context.Context, jobID string) ([]vertex, error) {
	var job struct {
		Vertices []vertex `json:"vertices"`
	}
	err := r.do(ctx, http.MethodGet, "/jobs/"+jobID, nil, &job)
	return job.Vertices, err
}

// TaskManagersOf returns the resource IDs of the TaskManagers running a
// subtask of job jobID ("taskmanager-0", as the harness names them).
func (r *REST) TaskManagersOf(ctx context.Context, jobID string) ([]string, error) {
	vertices, err := r.vertices(ctx, jobID)
	if err != nil {
		return nil, err
	}
	var tms []string
	for _, v := range vertices {
		var detail struct {
			Subtasks []struct {
				Status        string `json:"status"`
				TaskManagerID string `json:"taskmanager-id"`
			} `json:"subtasks"`
		}
		if err := r.do(ctx, http.MethodGet, "/jobs/"+jobID+"/vertices/"+v.ID, nil, &detail); err != nil {
			return nil, err
		}
		for _, st := range detail.Subtasks {
			if st.Status == "RUNNING" && !slices.Contains(tms, st.TaskManagerID) {
				tms = append(tms, st.TaskManagerID)
			}
		}
	}
	return tms, nil
}

// Checkpoint is one checkpoint's statistics.
type Checkpoint struct {
	ID               int64  `json:"id"`
	Status           string `json:"status"` // IN_PROGRESS, COMPLETED, FAILED
	IsSavepoint      bool   `json:"is_savepoint"`
	TriggerTimestamp int64  `json:"trigger_timestamp"`    // Unix ms
	LatestAck        int64  `json:"latest_ack_timestamp"` // Unix ms
	StateSize        int64  `json:"state_size"`
	EndToEndDuration int64  `json:"end_to_end_duration"` // ms
	AckedSubtasks    int    `json:"num_acknowledged_subtasks"`
	Subtasks         int    `json:"num_subtasks"`
	ExternalPath     string `json:"external_path"`
	Discarded        bool   `json:"discarded"`
	FailureTimestamp int64  `json:"failure_timestamp"`
	FailureMessage   string `json:"failure_message"`
}

// Checkpoints is GET /jobs/:jobid/checkpoints.
type Checkpoints struct {
	Counts struct {
		Restored   int `json:"restored"`
		Total      int `json:"total"`
		InProgress int `json:"in_progress"`
		Completed  int `json:"completed"`
		Failed     int `json:"failed"`
	} `json:"counts"`
	Latest struct {
		Completed *Checkpoint `json:"completed"`
		Savepoint *Checkpoint `json:"savepoint"`
		Failed    *Checkpoint `json:"failed"`
		Restored  *struct {
			ID           int64  `json:"id"`
			ExternalPath string `json:"external_path"`
			IsSavepoint  bool   `json:"is_savepoint"`
		} `json:"restored"`
	} `json:"latest"`
	History []Checkpoint `json:"history"`
}

// Checkpoints returns a job's checkpoint statistics.
func (r *REST) Checkpoints(ctx context.Context, jobID string) (Checkpoints, error) {
	var c Checkpoints
	err := r.do(ctx, http.MethodGet, "/jobs/"+jobID+"/checkpoints", nil, &c)
	return c, err
}

// CheckpointConfig is GET /jobs/:jobid/checkpoints/config: how the job
// checkpoints, as the JobManager applied it.
type CheckpointConfig struct {
	Mode            string `json:"mode"`
	Interval        int64  `json:"interval"` // ms; Long.MAX_VALUE when checkpointing is off
	Timeout         int64  `json:"timeout"`
	MinPause        int64  `json:"min_pause"`
	MaxConcurrent   int    `json:"max_concurrent"`
	Externalization struct {
		Enabled              bool `json:"enabled"`
		DeleteOnCancellation bool `json:"delete_on_cancellation"`
	} `json:"externalization"`
	StateBackend      string `json:"state_backend"`
	CheckpointStorage string `json:"checkpoint_storage"`
	Unaligned         bool   `json:"unaligned_checkpoints"`
}

// CheckpointConfig returns a job's checkpoint configuration. Flink answers
// 404 when the job does not checkpoint.
func (r *REST) CheckpointConfig(ctx context.Context, jobID string) (CheckpointConfig, error) {
	var c CheckpointConfig
	err := r.do(ctx, http.MethodGet, "/jobs/"+jobID+"/checkpoints/config", nil, &c)
	return c, err
}

// StopWithSavepoint stops a job with a savepoint in dir (stop-with-savepoint:
// the sources stop, the savepoint completes, the job finishes) and returns
// the savepoint's path once it completed.
func (r *REST) StopWithSavepoint(ctx context.Context, jobID, dir string) (string, error) {
	return r.savepoint(ctx, jobID, "/stop", map[string]any{"targetDirectory": dir, "drain": false})
}

// Savepoint takes a savepoint of a running job in dir, which runs on, and
// returns its path once it completed.
func (r *REST) Savepoint(ctx context.Context, jobID, dir string) (string, error) {
	return r.savepoint(ctx, jobID, "/savepoints", map[string]any{"target-directory": dir, "cancel-job": false})
}

// savepoint triggers a savepoint with POST /jobs/:jobid+path and polls
// GET /jobs/:jobid/savepoints/:triggerid until it completed.
func (r *REST) savepoint(ctx context.Context, jobID, path string, body any) (string, error) {
	var trigger struct {
		ID string `json:"request-id"`
	}
	if err := r.do(ctx, http.MethodPost, "/jobs/"+jobID+path, body, &trigger); err != nil {
		return "", err
	}
	for {
		var status struct {
			Status struct {
				ID string `json:"id"` // IN_PROGRESS, COMPLETED
			} `json:"status"`
			Operation struct {
				Location string          `json:"location"`
				Failure  json.RawMessage `json:"failure-cause"`
			} `json:"operation"`
		}
		if err := r.do(ctx, http.MethodGet, "/jobs/"+jobID+"/savepoints/"+trigger.ID, nil, &status); err != nil {
			return "", err
		}
		if status.Status.ID == "COMPLETED" {
			if status.Operation.Location == "" {
				return "", fmt.Errorf("flink REST: savepoint of job %s failed: %s", jobID, tail(string(status.Operation.Failure), 2000))
			}
			return status.Operation.Location, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("flink REST: savepoint of job %s did not complete: %w", jobID, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Exceptions returns what made a job fail or restart, newest first, as
// GET /jobs/:jobid/exceptions reports them: each exception's first line
// and its causes.
func (r *REST) Exceptions(ctx context.Context, jobID string) ([]string, error) {
	var ex struct {
		Root    string `json:"root-exception"`
		History struct {
			Entries []struct {
				Exception string `json:"stacktrace"`
				Task      string `json:"taskName"`
			} `json:"entries"`
		} `json:"exceptionHistory"`
	}
	if err := r.do(ctx, http.MethodGet, "/jobs/"+jobID+"/exceptions", nil, &ex); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ex.History.Entries {
		out = append(out, e.Task+": "+tail(causes(e.Exception), 4000))
	}
	if len(out) == 0 && ex.Root != "" { // a job that never started has no history
		out = append(out, tail(causes(ex.Root), 4000))
	}
	return out, nil
}

// causes is a Java stack trace's first line and its "Caused by" lines,
// each with the message lines that follow it (an SDK harness's error
// spans several).
func causes(trace string) string {
	lines := strings.Split(trace, "\n")
	out := lines[:1]
	inCause := false
	for _, l := range lines[1:] {
		switch t := strings.TrimSpace(l); {
		case strings.HasPrefix(t, "Caused by:"):
			inCause = true
		case strings.HasPrefix(t, "at ") || strings.HasPrefix(t, "..."):
			inCause = false
		}
		if inCause {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// OperatorMetrics sums, for each of names, the operator metrics of job
// jobID whose names end in "."+name, over every vertex and subtask; a name
// no operator has is missing from the answer. Beam's Flink runner names an
// SDK metric namespace_name ("pubsubio_pending_acks"). Flink fetches
// metrics from the TaskManagers at most every
// metrics.fetcher.update-interval (10 s by default), so they lag.
func (r *REST) OperatorMetrics(ctx context.Context, jobID string, names ...string) (map[string]float64, error) {
	vertices, err := r.vertices(ctx, jobID)
	if err != nil {
		return nil, err
	}
	name := func(id string) string { return id[strings.LastIndex(id, ".")+1:] }
	sums := map[string]float64{}
	for _, v := range vertices {
		path := "/jobs/" + jobID + "/vertices/" + v.ID + "/metrics"
		var listed []struct {
			ID string `json:"id"`
		}
		if err := r.do(ctx, http.MethodGet, path, nil, &listed); err != nil {
			return nil, err
		}
		var ids []string
		for _, m := range listed {
			if slices.Contains(names, name(m.ID)) {
				ids = append(ids, url.QueryEscape(m.ID))
			}
		}
		if len(ids) == 0 {
			continue
		}
		var values []struct {
			ID    string `json:"id"`
			Value string `json:"value"`
		}
		if err := r.do(ctx, http.MethodGet, path+"?get="+strings.Join(ids, ","), nil, &values); err != nil {
			return nil, err
		}
		for _, m := range values {
			n, err := strconv.ParseFloat(m.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("flink REST GET %s: metric %s: %w", path, m.ID, err)
			}
			sums[name(m.ID)] += n
		}
	}
	return sums, nil
}
