package flink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

func (r *REST) do(ctx context.Context, method, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+r.Addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("flink REST %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("flink REST %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("flink REST %s %s: %s: %s", method, path, resp.Status, tail(string(body), 2000))
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("flink REST %s %s: %w in %s", method, path, err, tail(string(body), 2000))
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
	err := r.do(ctx, http.MethodGet, "/overview", &o)
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
	err := r.do(ctx, http.MethodGet, "/jobs/overview", &resp)
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
	return r.do(ctx, http.MethodPatch, "/jobs/"+jobID+"?mode=cancel", nil)
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
	err := r.do(ctx, http.MethodGet, "/jobs/"+jobID+"/checkpoints", &c)
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
	err := r.do(ctx, http.MethodGet, "/jobs/"+jobID+"/checkpoints/config", &c)
	return c, err
}
