// Package flinkjobtest is a Flink JobManager's REST API as far as the
// read's commit gate and its drain use it, for tests: jobs by name, a
// job's details with the JobManager's clock, its configuration, its
// checkpoint configuration and statistics, its plan (a source feeding a stage of two subtasks) with
// the stage's input watermarks, and stop-with-savepoint. Faults make it
// answer a status instead.
package flinkjobtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitLimit bounds the Await methods.
const WaitLimit = 10 * time.Second

// JobManager answers on a clock of its own: the real one plus an offset,
// in milliseconds as Flink's REST API gives it.
type JobManager struct {
	srv *httptest.Server

	mu             sync.Mutex
	offset         time.Duration
	last           int64 // the clock's last reading (ms)
	jobs           []*job
	fault          func(path string) int
	faulted        int            // requests answered with a fault
	noSavepointDir bool           // stop answers as a cluster without state.savepoints.dir
	served         map[string]int // successful answers, by the kind of request
}

type job struct {
	id, name, state string
	interval        int64 // ms; 0: no checkpoint configuration
	history         []checkpoint
	restoredID      int64
	restoredAt      int64 // ms
	inputEnded      bool  // the stage's input watermark is at its end
	finishesBundles bool  // its Beam options set finishBundleBeforeCheckpointing
}

// endOfTime is Flink's watermark at its end, Long.MAX_VALUE.
const endOfTime = "9223372036854775807"

type checkpoint struct {
	id        int64
	trigger   int64 // ms
	completed bool
	kind      string
}

// Kinds of checkpoint, as Flink's checkpoint_type names them.
const (
	Checkpoint    = "CHECKPOINT"
	Savepoint     = "SAVEPOINT"
	SyncSavepoint = "SYNC_SAVEPOINT" // the savepoint of stop-with-savepoint
)

// New starts a JobManager running a job for each name, checkpointing every
// second, with IDs job0, job1, ...; the test's cleanup stops it.
func New(t testing.TB, names ...string) *JobManager {
	jm := &JobManager{served: map[string]int{}}
	for i, n := range names {
		jm.jobs = append(jm.jobs, &job{id: fmt.Sprintf("job%d", i), name: n, state: "RUNNING", interval: 1000})
	}
	jm.srv = httptest.NewServer(http.HandlerFunc(jm.serve))
	t.Cleanup(jm.srv.Close)
	return jm
}

// Addr is the REST API's host:port.
func (jm *JobManager) Addr() string { return strings.TrimPrefix(jm.srv.URL, "http://") }

// now reads the JobManager's clock; jm.mu is held. Each reading is at
// least a millisecond after the one before, as if every event took one:
// events a test orders (an answer, then a checkpoint) are then ordered
// on the clock too, never in the same millisecond.
func (jm *JobManager) now() int64 {
	t := time.Now().Add(jm.offset).UnixMilli()
	if t <= jm.last {
		t = jm.last + 1
	}
	jm.last = t
	return t
}

// Faults other than an HTTP status.
const (
	Hang  = -1 // no answer until the client gives up
	Reset = -2 // the connection closed without an answer
)

func (jm *JobManager) serve(w http.ResponseWriter, r *http.Request) {
	if jm.injectFault(w, r) {
		return
	}
	jm.mu.Lock()
	defer jm.mu.Unlock()
	answer := func(kind string, v any) {
		jm.served[kind]++
		_ = json.NewEncoder(w).Encode(v)
	}
	notFound := func(msg string) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"errors":[%q]}`, msg)
	}
	path := strings.Trim(r.URL.Path, "/")
	if path == "jobs/overview" {
		jobs := []map[string]any{}
		for _, j := range jm.jobs {
			jobs = append(jobs, map[string]any{"jid": j.id, "name": j.name, "state": j.state})
		}
		answer("overview", map[string]any{"jobs": jobs})
		return
	}
	parts := strings.Split(path, "/")
	if len(parts) < 2 || parts[0] != "jobs" {
		notFound("Not found: /" + path)
		return
	}
	var j *job
	for _, c := range jm.jobs {
		if c.id == parts[1] {
			j = c
		}
	}
	if j == nil {
		notFound("org.apache.flink.runtime.rest.NotFoundException: Job " + parts[1] + " not found")
		return
	}
	switch strings.Join(parts[2:], "/") {
	case "":
		answer("job", map[string]any{"jid": j.id, "name": j.name, "state": j.state, "now": jm.now(), "vertices": []map[string]any{
			{"id": "source", "parallelism": 1, "status": "RUNNING"}, {"id": "stage", "parallelism": 2, "status": "RUNNING"}}})
	case "plan":
		answer("plan", map[string]any{"plan": map[string]any{"nodes": []map[string]any{
			{"id": "source"}, {"id": "stage", "inputs": []map[string]any{{"num": 0, "id": "source"}}}}}})
	case "vertices/stage/watermarks":
		mark := fmt.Sprint(jm.now())
		if j.inputEnded {
			mark = endOfTime
		}
		answer("watermarks", []map[string]any{{"id": "0.currentInputWatermark", "value": mark}, {"id": "1.currentInputWatermark", "value": mark}})
	case "stop":
		if r.Method != http.MethodPost {
			notFound("Not found: GET /" + path)
			return
		}
		if jm.noSavepointDir {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"errors":["org.apache.flink.runtime.rest.handler.RestHandlerException: Config key [state.savepoints.dir] is not set. Property [targetDirectory] must be provided."]}`)
			return
		}
		j.state = "FINISHED"
		j.history = append(j.history, checkpoint{id: int64(len(j.history)) + j.restoredID + 1, trigger: jm.now(), completed: true, kind: SyncSavepoint})
		w.WriteHeader(http.StatusAccepted)
		answer("stop", map[string]any{"request-id": "stop-" + j.id})
	case "savepoints/stop-" + j.id:
		answer("savepoint", map[string]any{"status": map[string]any{"id": "COMPLETED"}, "operation": map[string]any{"location": "file:///savepoints/" + j.id}})
	case "checkpoints/config":
		if j.interval == 0 {
			notFound("Checkpointing is not enabled for this job (" + j.id + ").")
			return
		}
		answer("config", map[string]any{"mode": "exactly_once", "interval": j.interval})
	case "checkpoints":
		answer("checkpoints", j.statistics())
	case "config":
		user := map[string]string{"checkpointingInterval": fmt.Sprint(j.interval)}
		if j.finishesBundles {
			user["finishBundleBeforeCheckpointing"] = "true"
		}
		answer("jobconfig", map[string]any{"jid": j.id, "name": j.name, "execution-config": map[string]any{"job-parallelism": 2, "user-config": user}})
	default:
		notFound("Not found: /" + path)
	}
}

// statistics is the job's /checkpoints answer: latest.completed holds
// checkpoints only, latest.savepoint savepoints, history youngest first.
func (j *job) statistics() map[string]any {
	latest := map[string]any{}
	history := []map[string]any{}
	for i := len(j.history) - 1; i >= 0; i-- {
		c := j.history[i]
		status := "IN_PROGRESS"
		if c.completed {
			status = "COMPLETED"
		}
		entry := map[string]any{"id": c.id, "status": status, "is_savepoint": c.kind != Checkpoint,
			"trigger_timestamp": c.trigger, "checkpoint_type": c.kind}
		history = append(history, entry)
		switch {
		case !c.completed:
		case c.kind == Checkpoint && latest["completed"] == nil:
			latest["completed"] = entry
		case c.kind != Checkpoint && latest["savepoint"] == nil:
			latest["savepoint"] = entry
		}
	}
	if j.restoredID != 0 {
		latest["restored"] = map[string]any{"id": j.restoredID, "restore_timestamp": j.restoredAt, "is_savepoint": false}
	}
	return map[string]any{"latest": latest, "history": history}
}

// job returns the job named name; jm.mu is held.
func (jm *JobManager) job(name string) *job {
	for _, j := range jm.jobs {
		if j.name == name {
			return j
		}
	}
	panic("flinkjobtest: no job " + name)
}

// SetJob changes the ID, state and checkpoint interval (ms; 0 answers
// that the job has no checkpoint configuration) of the job named name,
// where not empty or zero.
func (jm *JobManager) SetJob(name, id, state string, interval int64) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	j := jm.job(name)
	if id != "" {
		j.id = id
	}
	if state != "" {
		j.state = state
	}
	if interval != 0 {
		j.interval = interval
	}
}

// FinishBundles makes the job named name one whose Beam options set
// finishBundleBeforeCheckpointing, as its configuration shows them.
func (jm *JobManager) FinishBundles(name string) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.job(name).finishesBundles = true
}

// NoCheckpoints makes the job named name one without a checkpoint
// configuration: Flink answers 404 for it.
func (jm *JobManager) NoCheckpoints(name string) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.job(name).interval = 0
}

// EndInput puts the input watermark of the stage of the job named name at
// its end: only the job's source runs.
func (jm *JobManager) EndInput(name string) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.job(name).inputEnded = true
}

// State is the state of the job named name.
func (jm *JobManager) State(name string) string {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return jm.job(name).state
}

// SetClock sets the JobManager's clock to the real one plus offset: a
// step, back or forward.
func (jm *JobManager) SetClock(offset time.Duration) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.offset, jm.last = offset, 0
}

// Trigger starts a checkpoint of kind of the job named name, on the
// JobManager's clock, and returns its ID.
func (jm *JobManager) Trigger(name, kind string) int64 {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	j := jm.job(name)
	id := j.restoredID + 1
	if n := len(j.history); n > 0 {
		id = j.history[n-1].id + 1
	}
	j.history = append(j.history, checkpoint{id: id, trigger: jm.now(), kind: kind})
	return id
}

// Complete completes checkpoint id of the job named name.
func (jm *JobManager) Complete(name string, id int64) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	j := jm.job(name)
	for i := range j.history {
		if j.history[i].id == id {
			j.history[i].completed = true
		}
	}
}

// Checkpoint triggers and completes a checkpoint of the job named name.
func (jm *JobManager) Checkpoint(name string) int64 {
	id := jm.Trigger(name, Checkpoint)
	jm.Complete(name, id)
	return id
}

// Restore restarts the job named name from its checkpoint id.
func (jm *JobManager) Restore(name string, id int64) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	j := jm.job(name)
	j.restoredID, j.restoredAt = id, jm.now()
}

// NoSavepointDir makes the JobManager answer a stop-with-savepoint as
// Flink does when the cluster sets no state.savepoints.dir: 400 Bad
// Request, naming the key.
func (jm *JobManager) NoSavepointDir() {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.noSavepointDir = true
}

// SetFault makes the JobManager answer fault(path) instead, where
// non-zero: an HTTP status, Hang or Reset. nil ends the faults.
func (jm *JobManager) SetFault(fault func(path string) int) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.fault = fault
}

// injectFault answers r with the fault set for its path, if any.
func (jm *JobManager) injectFault(w http.ResponseWriter, r *http.Request) bool {
	jm.mu.Lock()
	code := 0
	if jm.fault != nil {
		code = jm.fault(r.URL.Path)
	}
	if code != 0 {
		jm.faulted++
	}
	jm.mu.Unlock()
	switch code {
	case 0:
		return false
	case Hang:
		<-r.Context().Done()
	case Reset:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	default:
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"errors":["fault injected: %d"]}`, code)
	}
	return true
}

// Served is how many requests of a kind ("overview", "job", "config" (of
// checkpoints), "jobconfig", "checkpoints", "plan", "watermarks", "stop",
// "savepoint") the JobManager answered successfully.
func (jm *JobManager) Served(kind string) int {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return jm.served[kind]
}

// AwaitAnswers waits until the JobManager has answered n more requests
// for checkpoint statistics. A watcher polls one request after another, so
// after two the watcher has applied a poll that began after the call:
// it has seen what the JobManager answers now.
func (jm *JobManager) AwaitAnswers(t testing.TB, n int) {
	t.Helper()
	want := jm.Served("checkpoints") + n
	Await(t, fmt.Sprintf("%d more answers with checkpoint statistics", n), func() bool { return jm.Served("checkpoints") >= want })
}

// AwaitFaults waits until the JobManager has answered n more requests
// with a fault.
func (jm *JobManager) AwaitFaults(t testing.TB, n int) {
	t.Helper()
	faulted := func() int {
		jm.mu.Lock()
		defer jm.mu.Unlock()
		return jm.faulted
	}
	want := faulted() + n
	Await(t, fmt.Sprintf("%d more requests answered with a fault", n), func() bool { return faulted() >= want })
}

// Await waits until cond holds, for at most WaitLimit; then it fails the
// test, naming what it waited for.
func Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, WaitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}
