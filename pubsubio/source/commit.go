package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// When a split may ack what a bundle emitted: once the runner has made the
// bundle's output durable. Prism and Dataflow persist a residual only with
// the output of the bundle that produced it, so the split's next bundle
// (the residual's) may ack at once (CommitResume). Flink runs a residual
// at once and makes output durable only at checkpoints: bundle N's output
// and residual leave the task thread before bundle N+1 starts, so a
// checkpoint triggered after N+1 started holds them, and once it has
// completed N's messages may be acked (CommitFlinkCheckpoint). The read
// learns of completed checkpoints from the JobManager's REST API: a
// process-wide watcher per job polls it in the background, and each bundle
// acks what the latest completed checkpoint covers; the rest stay held, the
// client extending their leases.

// checkpointSkew is how far the worker's clock may run ahead of the
// JobManager's: a bundle that began at t is covered by a checkpoint
// triggered after t plus this.
const checkpointSkew = time.Second

// checkpointPoll is how often a watcher asks the REST API for the latest
// completed checkpoint, and checkpointRequestTimeout bounds one request.
const (
	checkpointPoll           = 500 * time.Millisecond
	checkpointRequestTimeout = 10 * time.Second
)

// checkpointJobWait is how long a watcher looks for its job (a deployment
// takes seconds) before the read fails, naming it.
const checkpointJobWait = 5 * time.Minute

// awaitingCommit is what one bundle emitted, waiting for the runner to
// make it durable: ack IDs of owner, whose successor began at began.
type awaitingCommit struct {
	ids   []ackID
	owner string
	began time.Time
}

// checkpointWatcher follows one Flink job's completed checkpoints.
type checkpointWatcher struct {
	rest, job string // host:port; the job's name prefix (flinkJobName)
	client    *http.Client

	users int           // split readers using it (under watchers' lock)
	stop  chan struct{} // closed when the last one is released

	mu      sync.Mutex
	jobID   string
	latest  time.Time // trigger time of the latest completed checkpoint
	err     error     // a problem acks cannot wait out: the read fails
	lastErr error     // the latest failed poll, logged once
	started time.Time
}

// watchers are the process's checkpoint watchers, by REST address and job.
var watchers = struct {
	sync.Mutex
	m map[[2]string]*checkpointWatcher
}{m: map[[2]string]*checkpointWatcher{}}

// watcherFor returns the process's watcher of job at rest, started; the
// caller releases it.
func watcherFor(rest, job string, s *stats) *checkpointWatcher {
	watchers.Lock()
	defer watchers.Unlock()
	key := [2]string{rest, job}
	w := watchers.m[key]
	if w == nil {
		w = &checkpointWatcher{rest: rest, job: job, client: &http.Client{Timeout: checkpointRequestTimeout}, started: time.Now(), stop: make(chan struct{})}
		watchers.m[key] = w
		go w.watch(s)
	}
	w.users++
	return w
}

// release drops one user of w; the last stops it.
func (w *checkpointWatcher) release() {
	watchers.Lock()
	defer watchers.Unlock()
	if w.users--; w.users == 0 {
		close(w.stop)
		delete(watchers.m, [2]string{w.rest, w.job})
	}
}

// covered reports whether a completed checkpoint covers a bundle whose
// successor began at began, or the error that means none ever will.
func (w *checkpointWatcher) covered(began time.Time) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return false, w.err
	}
	return w.latest.After(began.Add(checkpointSkew)), nil
}

// watch polls the REST API until the watcher is released.
func (w *checkpointWatcher) watch(s *stats) {
	t := time.NewTicker(checkpointPoll)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		err := w.poll()
		w.mu.Lock()
		switch {
		case err == nil:
			w.lastErr = nil
		case errors.Is(err, errCheckpointingOff) || w.jobID == "" && time.Since(w.started) > checkpointJobWait:
			w.err = err
		case w.lastErr == nil:
			s.add(checkpointPollFailures, 1)
			log.Warnf(context.Background(), "pubsubio.Read: asking Flink's REST API at %s for the checkpoints of job %s failed; acks wait for the next answer: %v", w.rest, w.job, err)
			w.lastErr = err
		default:
			s.add(checkpointPollFailures, 1)
			w.lastErr = err
		}
		w.mu.Unlock()
	}
}

var errCheckpointingOff = errors.New("checkpointing is off")

// poll finds the job if it is not known yet and reads its latest completed
// checkpoint.
func (w *checkpointWatcher) poll() error {
	ctx, cancel := context.WithTimeout(context.Background(), checkpointRequestTimeout)
	defer cancel()
	w.mu.Lock()
	id := w.jobID
	w.mu.Unlock()
	if id == "" {
		var err error
		if id, err = w.findJob(ctx); err != nil {
			return err
		}
		var cfg struct {
			Interval int64 `json:"interval"`
		}
		if err := w.get(ctx, "/jobs/"+id+"/checkpoints/config", &cfg); err != nil || cfg.Interval <= 0 || cfg.Interval == 1<<63-1 {
			return fmt.Errorf("the Flink job %s (%s) does not checkpoint (%v), so no output of the read is ever durable and no message may be acked: "+
				"turn checkpointing on with the pipeline option checkpointingInterval (docs/runners.md, Running on Flink), or set Commit to %s: %w",
				id, w.job, err, CommitResume, errCheckpointingOff)
		}
		w.mu.Lock()
		w.jobID = id
		w.mu.Unlock()
	}
	var cps struct {
		Latest struct {
			Completed *struct {
				Trigger int64 `json:"trigger_timestamp"`
			} `json:"completed"`
		} `json:"latest"`
	}
	if err := w.get(ctx, "/jobs/"+id+"/checkpoints", &cps); err != nil {
		return err
	}
	if c := cps.Latest.Completed; c != nil {
		w.mu.Lock()
		if t := time.UnixMilli(c.Trigger); t.After(w.latest) {
			w.latest = t
		}
		w.mu.Unlock()
	}
	return nil
}

// findJob returns the ID of the running job whose name is w.job's.
func (w *checkpointWatcher) findJob(ctx context.Context) (string, error) {
	var jobs struct {
		Jobs []struct {
			ID    string `json:"jid"`
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	if err := w.get(ctx, "/jobs/overview", &jobs); err != nil {
		return "", err
	}
	var ids []string
	for _, j := range jobs.Jobs {
		if strings.HasPrefix(j.Name, w.job+"-") && (j.State == "RUNNING" || j.State == "RESTARTING" || j.State == "CREATED") {
			ids = append(ids, j.ID)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no running Flink job has a name starting %q", w.job+"-")
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%d running Flink jobs have names starting %q (%v): give each job its own --job_name", len(ids), w.job+"-", ids)
}

func (w *checkpointWatcher) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.rest+path, nil)
	if err != nil {
		return err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.Unmarshal(body, v)
}

// flinkJobName is how Beam's Flink runner starts the name of the Flink job
// it submits for a Beam job named name (JobNameFactory: lower case, every
// character but a-z and 0-9 turned into 0; then -user-date-random).
func flinkJobName(name string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			return c
		}
		return '0'
	}, strings.ToLower(name))
}

// committed queues the ack IDs rest carries (what the bundle before it
// emitted, now) and returns those of every queued bundle whose output the
// runner has made durable: this process's, acked through the held
// messages, and another's, acked with the RPC. Under CommitResume that is
// rest's at once.
func (r *splitReader) committed(rest Restriction, now time.Time) (local, remote []ackID, err error) {
	ids := make([]ackID, len(rest.AckIDs))
	for i, id := range rest.AckIDs {
		ids[i] = ackID(id)
	}
	if r.checkpoints == nil {
		if rest.Owner != processID {
			return nil, ids, nil
		}
		return ids, nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(ids) > 0 {
		r.awaiting = append(r.awaiting, awaitingCommit{ids: ids, owner: rest.Owner, began: now})
	}
	n := 0
	for _, a := range r.awaiting {
		ok, err := r.checkpoints.covered(a.began)
		if err != nil {
			return nil, nil, fmt.Errorf("pubsubio.Read: split %d of %s cannot ack: %w", r.split.Index, r.split.Subscription, err)
		}
		if !ok {
			break // queued in the order their successors began
		}
		if a.owner == processID {
			local = append(local, a.ids...)
		} else {
			remote = append(remote, a.ids...)
		}
		n++
	}
	r.awaiting = r.awaiting[n:]
	return local, remote, nil
}

// awaitingCommit reports whether the split holds acks that wait for the
// runner's commit.
func (r *splitReader) awaitingCommit() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.awaiting) > 0
}
