package flinkjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// reading is what one successful poll read of the job.
type reading struct {
	n          int64  // the poll's number
	tried      string // the requests it made, for errors
	jobID      string
	state      string
	now        int64 // the JobManager's clock, ms
	configured bool  // its checkpointing is on
	off        bool  // its checkpointing is off, by a successful answer
	// finishesBundles: its Beam options, read with its checkpoint
	// configuration, set finishBundleBeforeCheckpointing (set only then).
	finishesBundles *bool
	restored        restore
	// completed are the checkpoints that count as durable points: completed
	// checkpoints, and savepoints that stop the job.
	completed []checkpoint
}

type checkpoint struct{ id, trigger int64 }

// Job states the watcher finds a job in by name: it runs or is about to.
var liveStates = map[string]bool{"CREATED": true, "INITIALIZING": true, "RUNNING": true, "RESTARTING": true, "RECONCILING": true}

// read polls the job: its details (the JobManager's clock), its checkpoint
// configuration and Beam options until known, and its checkpoint
// statistics. It looks the job up by name when id is empty or no longer
// answers.
func (w *Watcher) read(ctx context.Context, id string, configured bool) (r reading, err error) {
	var tried []string
	get := func(path string, v any) error {
		tried = append(tried, "GET "+path)
		err := w.client.get(ctx, path, v)
		if err != nil {
			count(err)
		}
		return err
	}
	defer func() { r.tried = strings.Join(tried, ", ") }()

	var details struct {
		State string `json:"state"`
		Now   int64  `json:"now"`
	}
	if id != "" {
		if err = get("/jobs/"+id, &details); isNotFound(err) {
			jobLookups.Add(1) // its ID stopped answering: a new job, or none
			id = ""
		} else if err != nil {
			return r, err
		} else if !liveStates[details.State] && details.State != "FINISHED" {
			id = "" // failed or cancelled: look for the job that carries on
		}
	}
	if id == "" {
		if id, err = findJob(ctx, get, w.key.job); err != nil {
			return r, err
		}
		configured = false
		if err = get("/jobs/"+id, &details); err != nil {
			return r, err
		}
	}
	r.jobID, r.state, r.now, r.configured = id, details.State, details.Now, configured
	if r.now <= 0 {
		return r, fmt.Errorf("GET /jobs/%s: the answer has no \"now\", the JobManager's clock", id)
	}

	if !configured {
		var cfg struct {
			Interval int64 `json:"interval"`
		}
		err = get("/jobs/"+id+"/checkpoints/config", &cfg)
		switch {
		case err == nil:
			r.configured = cfg.Interval > 0 && cfg.Interval != 1<<63-1
			r.off = !r.configured
		case isNotFound(err) && details.State == "RUNNING":
			// What Flink answers for a running job that does not checkpoint.
			r.off = true
		default:
			return r, err
		}
		finishes, err := finishesBundles(get, id)
		if err != nil {
			return r, err
		}
		r.finishesBundles = &finishes
	}

	var stats statistics
	if err = get("/jobs/"+id+"/checkpoints", &stats); err != nil {
		return r, err
	}
	if rs := stats.Latest.Restored; rs != nil {
		r.restored = restore{id: rs.ID, at: rs.RestoreTimestamp}
	}
	for _, c := range append(stats.History, stats.Latest.Completed, stats.Latest.Savepoint) {
		if c != nil && c.Status == "COMPLETED" && (c.Type == "CHECKPOINT" || c.Type == "SYNC_SAVEPOINT") {
			r.completed = append(r.completed, checkpoint{id: c.ID, trigger: c.TriggerTimestamp})
		}
	}
	return r, nil
}

// finishesBundles reports whether the job's Beam pipeline options, which
// Beam's Flink runner shows as the job's user configuration, set
// finishBundleBeforeCheckpointing: every open bundle then finishes before
// a checkpoint's snapshot. A JobManager that has no such answer (404)
// says no.
func finishesBundles(get func(string, any) error, id string) (bool, error) {
	var cfg struct {
		Execution struct {
			User map[string]string `json:"user-config"`
		} `json:"execution-config"`
	}
	err := get("/jobs/"+id+"/config", &cfg)
	if isNotFound(err) {
		return false, nil
	}
	return cfg.Execution.User["finishBundleBeforeCheckpointing"] == "true", err
}

// statistics is the part of GET /jobs/<id>/checkpoints the watcher reads.
type statistics struct {
	Latest struct {
		Completed *checkpointStats `json:"completed"`
		Savepoint *checkpointStats `json:"savepoint"`
		Restored  *struct {
			ID               int64 `json:"id"`
			RestoreTimestamp int64 `json:"restore_timestamp"`
		} `json:"restored"`
	} `json:"latest"`
	History []*checkpointStats `json:"history"`
}

type checkpointStats struct {
	ID               int64  `json:"id"`
	Status           string `json:"status"`
	Type             string `json:"checkpoint_type"`
	TriggerTimestamp int64  `json:"trigger_timestamp"`
}

// errNoLiveJob is findJob's error when no live job has the name.
var errNoLiveJob = errors.New("no running Flink job")

// findJob returns the ID of the live job whose name is job followed by "-"
// (Beam's Flink runner adds -user-date-random).
func findJob(ctx context.Context, get func(string, any) error, job string) (string, error) {
	var jobs struct {
		Jobs []struct {
			ID    string `json:"jid"`
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	if err := get("/jobs/overview", &jobs); err != nil {
		return "", err
	}
	var ids []string
	for _, j := range jobs.Jobs {
		if strings.HasPrefix(j.Name, job+"-") && liveStates[j.State] {
			ids = append(ids, j.ID)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("%w has a name starting %q", errNoLiveJob, job+"-")
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%d running Flink jobs have names starting %q (%v): give each job its own --job_name", len(ids), job+"-", ids)
}

// apply takes in a successful reading and reports whether a newly
// completed checkpoint covers more than before.
func (w *Watcher) apply(r reading) (advanced bool) {
	switch {
	case r.jobID != w.jobID:
		switch {
		case w.jobID != "":
			w.epoch++ // another job: nothing stamped under the last counts
		case r.restored != (restore{}) && w.marked:
			w.epoch++ // the first reading: its restore may postdate stamps made before it
			restoresSeen.Add(1)
		}
		w.jobID, w.off, w.restored, w.covers, w.finishesBundles = r.jobID, nil, r.restored, 0, false
	case r.restored != w.restored:
		w.epoch++
		w.restored, w.covers = r.restored, 0
		restoresSeen.Add(1)
	}
	w.configured = r.configured
	if r.finishesBundles != nil {
		w.finishesBundles = *r.finishesBundles
	}
	if r.off {
		w.off = fmt.Errorf("%w: the Flink job %s (%s) does not checkpoint, as its JobManager answers, so no output of the read is ever durable and no message may be acked; run it with checkpointing on (the runner's --checkpointingInterval)", ErrCheckpointingOff, r.jobID, w.key.job)
	}
	for _, c := range r.completed {
		// Only checkpoints after the restore: the job cannot restore from
		// an older one, and it may come from another JobManager's clock.
		if c.id > w.restored.id && c.trigger > w.covers {
			w.covers, advanced = c.trigger, true
		}
	}
	w.resolve(r.n, r.now)
	return advanced
}
