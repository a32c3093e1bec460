package flinkjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
)

// endOfTime is a watermark at its end: Long.MAX_VALUE, as Flink reports it.
const endOfTime = json.Number("9223372036854775807")

// Drain ends the live Flink job named job (Beam's name, followed by "-")
// once only its sources run: it waits until every vertex with inputs has
// finished or sees an input watermark at its end on every subtask, then
// stops the job with a drain (POST /jobs/<id>/stop, "drain": true), which
// finishes its sources, flushes what the job holds and takes a savepoint
// into the cluster's state.savepoints.dir. It polls every every, and
// returns once the savepoint completed, or with the last error when ctx
// ends first or no poll succeeded for patience. A job that is no longer
// live is left alone.
//
// Beam's Flink runner keeps a job's Impulse sources running while the job
// checkpoints (shutdownSourcesAfterIdleMs), so such a job never ends by
// itself; finishing them while a splittable DoFn still runs makes it spin
// without checkpoints (docs/upstream/flink-drain-and-resume-delay.md),
// which is why Drain waits for the watermarks first.
func Drain(ctx context.Context, rest, job string, every, patience time.Duration) error {
	c := client{addr: rest, http: &http.Client{Timeout: DefaultRequestTimeout}}
	get := func(path string, v any) error { return c.get(ctx, path, v) }
	var id, pending string
	answered := time.Now()
	for {
		var err error
		if id == "" {
			if id, err = findJob(ctx, get, job); errors.Is(err, errNoLiveJob) {
				return nil
			}
		}
		if id != "" {
			if pending, err = runningBeyondSources(get, id); err == nil && (pending == "" || pending == gone) {
				break
			}
			if isNotFound(err) {
				id = "" // a new job ID (a JobManager restarted without HA): look it up again
			}
		}
		var se *statusError
		if err == nil || errors.As(err, &se) && se.code < 500 {
			answered = time.Now()
		} else if time.Since(answered) > patience {
			return fmt.Errorf("%w for %v while waiting to drain the Flink job %q: %w", ErrNoAnswer, patience, job, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Flink job %q still runs more than its sources (%s): %w (last error: %v)", job, pending, ctx.Err(), err)
		case <-time.After(every):
		}
	}
	if pending == gone {
		return nil
	}
	var trigger struct {
		RequestID string `json:"request-id"`
	}
	if err := c.post(ctx, "/jobs/"+id+"/stop", map[string]any{"drain": true}, &trigger); err != nil {
		return fmt.Errorf("stopping the Flink job %s (%q) with a drain: %w", id, job, err)
	}
	return awaitSavepoint(ctx, get, id, trigger.RequestID, every)
}

// draining holds the jobs, by REST address and name, whose DrainOnce still
// runs in this process.
var draining sync.Map

// DrainOnce runs Drain in the background, with a context of its own,
// unless a DrainOnce of the same job on the same REST address still runs
// in this process: a retried bundle of a drain step must not stop the job
// a second time. It returns nil when it started nothing, else a channel
// that receives Drain's error once it returned.
func DrainOnce(rest, job string, every, patience time.Duration) <-chan error {
	key := rest + " " + job
	if _, runs := draining.LoadOrStore(key, true); runs {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		err := Drain(context.Background(), rest, job, every, patience)
		draining.Delete(key)
		done <- err
	}()
	return done
}

// gone is what runningBeyondSources says of a job that is no longer live.
const gone = "no longer live"

// runningBeyondSources says what of the job id runs short of the end of
// its input: empty once only its sources run, gone once it is no longer
// live.
func runningBeyondSources(get func(string, any) error, id string) (pending string, err error) {
	var details struct {
		State    string `json:"state"`
		Vertices []struct {
			ID          string `json:"id"`
			Parallelism int    `json:"parallelism"`
			Status      string `json:"status"`
		} `json:"vertices"`
	}
	if err := get("/jobs/"+id, &details); err != nil {
		return "", err
	}
	if !liveStates[details.State] {
		return gone, nil
	}
	if details.State != "RUNNING" {
		return "the job is " + details.State, nil
	}
	var plan struct {
		Plan struct {
			Nodes []struct {
				ID     string            `json:"id"`
				Inputs []json.RawMessage `json:"inputs"`
			} `json:"nodes"`
		} `json:"plan"`
	}
	if err := get("/jobs/"+id+"/plan", &plan); err != nil {
		return "", err
	}
	fed := map[string]bool{}
	for _, n := range plan.Plan.Nodes {
		fed[n.ID] = len(n.Inputs) > 0
	}
	for _, v := range details.Vertices {
		if !fed[v.ID] || v.Status == "FINISHED" {
			continue
		}
		var marks []struct {
			ID    string      `json:"id"`
			Value json.Number `json:"value"`
		}
		if err := get("/jobs/"+id+"/vertices/"+v.ID+"/watermarks", &marks); err != nil {
			return "", err
		}
		ended := 0
		for _, m := range marks {
			if strings.HasSuffix(m.ID, ".currentInputWatermark") && m.Value == endOfTime {
				ended++
			}
		}
		if ended < v.Parallelism {
			return fmt.Sprintf("vertex %s: %d of %d subtasks at the end of their input", v.ID, ended, v.Parallelism), nil
		}
	}
	return "", nil
}

// awaitSavepoint waits for the stop's savepoint, request of job id.
func awaitSavepoint(ctx context.Context, get func(string, any) error, id, request string, every time.Duration) error {
	path := "/jobs/" + id + "/savepoints/" + request
	for {
		var answer struct {
			Status struct {
				ID string `json:"id"`
			} `json:"status"`
			Operation struct {
				Location string `json:"location"`
				Failure  *struct {
					Class      string `json:"class"`
					StackTrace string `json:"stack-trace"`
				} `json:"failure-cause"`
			} `json:"operation"`
		}
		err := get(path, &answer)
		switch {
		case err == nil && answer.Status.ID == "COMPLETED" && answer.Operation.Failure != nil:
			first, _, _ := strings.Cut(answer.Operation.Failure.StackTrace, "\n")
			return fmt.Errorf("the drain of the Flink job %s failed: %s", id, text.Truncate(first, maxDetail))
		case err == nil && answer.Status.ID == "COMPLETED":
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the drain of the Flink job %s did not complete: %w (last: %v)", id, ctx.Err(), err)
		case <-time.After(every):
		}
	}
}
