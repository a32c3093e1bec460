package flinkjob

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob/flinkjobtest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
)

// watch starts a watcher of the job "orders" on jm that polls every 10 ms
// and gives a request 200 ms; the test's cleanup releases it.
func watch(t *testing.T, jm *flinkjobtest.JobManager) *Watcher {
	w := Watch(jm.Addr(), "orders", Options{PollInterval: 10 * time.Millisecond, RequestTimeout: 200 * time.Millisecond})
	t.Cleanup(w.Release)
	return w
}

// checkVerdict checks what w says of s.
func checkVerdict(t *testing.T, w *Watcher, what string, s Stamp, want Verdict) {
	t.Helper()
	if got := w.Judge(s); got != want {
		t.Errorf("%s: verdict %v, want %v", what, got, want)
	}
}

// A stamp is covered by a checkpoint triggered after it, on the
// JobManager's clock, whatever that clock's offset from the worker's.
func TestStampCoveredOnTheJobManagersClock(t *testing.T) {
	for _, offset := range []time.Duration{-time.Hour, 0, time.Hour} {
		t.Run(fmt.Sprint(offset), func(t *testing.T) {
			jm := flinkjobtest.New(t, "orders-root-1-a")
			jm.SetClock(offset)
			w := watch(t, jm)
			jm.AwaitAnswers(t, 1)
			jm.Checkpoint("orders-root-1-a") // before the stamp, not yet seen
			s := w.Mark()
			jm.AwaitAnswers(t, 2)
			checkVerdict(t, w, "a checkpoint triggered before the stamp completed", s, Waiting)
			jm.Checkpoint("orders-root-1-a")
			jm.AwaitAnswers(t, 2)
			checkVerdict(t, w, "a checkpoint triggered after the stamp completed", s, Covered)
		})
	}
}

// A JobManager clock stepped back after a stamp delays its coverage and
// never brings it forward.
func TestStampAfterAClockStepBack(t *testing.T) {
	jm := flinkjobtest.New(t, "orders-root-1-a")
	w := watch(t, jm)
	s := w.Mark()
	jm.AwaitAnswers(t, 2)
	jm.SetClock(-time.Minute)
	jm.Checkpoint("orders-root-1-a")
	jm.AwaitAnswers(t, 2)
	checkVerdict(t, w, "a checkpoint whose trigger time the step put before the stamp", s, Waiting)
}

// Savepoints that stop the job make output durable; other savepoints are
// not checkpoints the job restores from, and cover nothing.
func TestSavepoints(t *testing.T) {
	jm := flinkjobtest.New(t, "orders-root-1-a")
	w := watch(t, jm)
	s := w.Mark()
	jm.AwaitAnswers(t, 2)
	jm.Complete("orders-root-1-a", jm.Trigger("orders-root-1-a", flinkjobtest.Savepoint))
	jm.AwaitAnswers(t, 2)
	checkVerdict(t, w, "a savepoint completed", s, Waiting)
	jm.Complete("orders-root-1-a", jm.Trigger("orders-root-1-a", flinkjobtest.SyncSavepoint))
	jm.AwaitAnswers(t, 2)
	checkVerdict(t, w, "the savepoint of stop-with-savepoint completed", s, Covered)
}

// A restore voids what was stamped before the watcher saw it; what is
// stamped after is covered by checkpoints newer than the restored one.
func TestRestoreVoidsStamps(t *testing.T) {
	jm := flinkjobtest.New(t, "orders-root-1-a")
	w := watch(t, jm)
	restoresBefore := restoresSeen.Load()
	first := jm.Checkpoint("orders-root-1-a")
	s := w.Mark()
	jm.AwaitAnswers(t, 2)
	jm.Restore("orders-root-1-a", first)
	jm.AwaitAnswers(t, 2)
	checkVerdict(t, w, "stamped before the restore", s, Void)
	after := w.Mark()
	jm.AwaitAnswers(t, 2)
	jm.Checkpoint("orders-root-1-a")
	jm.AwaitAnswers(t, 2)
	checkVerdict(t, w, "stamped after the restore, a newer checkpoint completed", after, Covered)
	awaitCounter(t, "flink_restores_seen", restoresSeen, restoresBefore, 1)
}

// Failed requests of every kind delay coverage and fail nothing within
// the patience; each counts under its kind; past the patience Err says
// what was asked and what came back; the next answer ends it.
func TestFailedRequestsDelay(t *testing.T) {
	cases := []struct {
		name        string
		fault       int
		counterName string
		counter     *metrics.Counter
		got         string
	}{
		{"503", http.StatusServiceUnavailable, "flink_rest_unavailable", restUnavailable, "503 Service Unavailable"},
		{"no answer", flinkjobtest.Hang, "flink_rest_timeouts", restTimeouts, "Timeout"},
		{"connection reset", flinkjobtest.Reset, "flink_rest_unreachable", restUnreachable, "EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jm := flinkjobtest.New(t, "orders-root-1-a")
			w := watch(t, jm)
			jm.AwaitAnswers(t, 1)
			before, failuresBefore := c.counter.Load(), pollFailures.Load()
			jm.SetFault(func(path string) int {
				if strings.HasSuffix(path, "/checkpoints") {
					return c.fault
				}
				return 0
			})
			s := w.Mark()
			jm.AwaitFaults(t, 3)
			jm.Checkpoint("orders-root-1-a")
			jm.AwaitFaults(t, 3)
			checkVerdict(t, w, "while the statistics fail", s, Waiting)
			if err := w.Err(time.Hour); err != nil {
				t.Errorf("Err within the patience: %v", err)
			}
			err := w.Err(time.Millisecond)
			if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "/checkpoints") || !strings.Contains(err.Error(), c.got) || !strings.Contains(err.Error(), "Flink.REST") {
				t.Errorf("Err past the patience: %v; want ErrNoAnswer naming Flink.REST, the request and %q", err, c.got)
			}
			awaitCounter(t, c.counterName, c.counter, before, 3)
			awaitCounter(t, "checkpoint_poll_failures", pollFailures, failuresBefore, 3)

			jm.SetFault(nil)
			flinkjobtest.Await(t, "the next answer ends the error", func() bool { return w.Err(time.Millisecond) == nil })
			jm.Checkpoint("orders-root-1-a")
			jm.AwaitAnswers(t, 2)
			checkVerdict(t, w, "once the statistics answer", s, Covered)
		})
	}
}

// Only an answer that says so makes checkpointing off: a failed request
// for the configuration does not, and a job still starting may have none
// yet.
func TestCheckpointingOff(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(jm *flinkjobtest.JobManager)
		off     bool
	}{
		{"on", func(*flinkjobtest.JobManager) {}, false},
		{"no configuration", func(jm *flinkjobtest.JobManager) { jm.NoCheckpoints("orders-root-1-a") }, true},
		{"an interval of forever", func(jm *flinkjobtest.JobManager) { jm.SetJob("orders-root-1-a", "", "", 1<<63-1) }, true},
		{"no configuration yet", func(jm *flinkjobtest.JobManager) {
			jm.NoCheckpoints("orders-root-1-a")
			jm.SetJob("orders-root-1-a", "", "INITIALIZING", 0)
		}, false},
		{"the configuration fails", func(jm *flinkjobtest.JobManager) {
			jm.SetFault(func(path string) int {
				if strings.HasSuffix(path, "/config") {
					return http.StatusInternalServerError
				}
				return 0
			})
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jm := flinkjobtest.New(t, "orders-root-1-a")
			c.prepare(jm)
			w := watch(t, jm)
			flinkjobtest.Await(t, "the watcher asked for the configuration twice", func() bool {
				return jm.Served("job") >= 2
			})
			err := w.Err(time.Hour)
			if got := errors.Is(err, ErrCheckpointingOff); got != c.off {
				t.Errorf("Err = %v; off %v, want %v", err, got, c.off)
			}
			if c.off && !strings.Contains(err.Error(), "checkpointingInterval") {
				t.Errorf("Err = %v; want it to say what to set", err)
			}
		})
	}
}

// A job whose ID stops answering is looked up again by its name; stamps
// made before the watcher saw the new ID are void.
func TestJobLookedUpAgain(t *testing.T) {
	jm := flinkjobtest.New(t, "orders-root-1-a")
	w := watch(t, jm)
	lookups := jobLookups.Load()
	jm.AwaitAnswers(t, 1)
	s := w.Mark()
	jm.SetJob("orders-root-1-a", "job-after-restart", "", 0)
	jm.AwaitAnswers(t, 2) // only the job under its new ID answers
	checkVerdict(t, w, "stamped before the new ID", s, Void)
	after := w.Mark()
	jm.AwaitAnswers(t, 2)
	jm.Checkpoint("orders-root-1-a")
	jm.AwaitAnswers(t, 2)
	checkVerdict(t, w, "stamped under the new ID", after, Covered)
	awaitCounter(t, "flink_job_lookups", jobLookups, lookups, 1)
}

// Two running jobs of one name: the watcher cannot tell which is the
// read's, and says what to do.
func TestTwoJobsOfOneName(t *testing.T) {
	jm := flinkjobtest.New(t, "orders-root-1-a", "orders-root-2-b")
	w := watch(t, jm)
	flinkjobtest.Await(t, "the watcher asked for the jobs twice", func() bool { return jm.Served("overview") >= 2 })
	err := w.Err(time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "--job_name") {
		t.Errorf("Err = %v; want one asking for a --job_name of its own", err)
	}
}

// awaitCounter waits until c has grown by at least n since before: the
// watcher counts a failure after the JobManager has answered it.
func awaitCounter(t *testing.T, name string, c *metrics.Counter, before, n int64) {
	t.Helper()
	flinkjobtest.Await(t, fmt.Sprintf("%s grown by %d", name, n), func() bool { return c.Load()-before >= n })
}
