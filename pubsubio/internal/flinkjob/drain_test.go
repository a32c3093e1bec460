package flinkjob

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob/flinkjobtest"
)

// drain runs Drain of the job "orders" on jm in the background, polling
// every 10 ms; its error arrives on the channel.
func drain(t *testing.T, jm *flinkjobtest.JobManager, patience time.Duration) <-chan error {
	ctx, cancel := context.WithTimeout(context.Background(), flinkjobtest.WaitLimit)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- Drain(ctx, jm.Addr(), "orders", 10*time.Millisecond, patience) }()
	return done
}

// checkStoppedOnce checks that the drain ended without an error, having
// stopped the job named name once.
func checkStoppedOnce(t *testing.T, jm *flinkjobtest.JobManager, name string, done <-chan error) {
	t.Helper()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, state := jm.Served("stop"), jm.State(name); n != 1 || state != "FINISHED" {
		t.Errorf("stopped %d times, the job is %s; want once, FINISHED", n, state)
	}
}

// The drain stops the job only once its stage's input is at its end, and
// returns once the stop's savepoint completed.
func TestDrainWaitsForTheEndOfInput(t *testing.T) {
	const name = "orders-root-1-a"
	jm := flinkjobtest.New(t, name)
	done := drain(t, jm, time.Minute)
	flinkjobtest.Await(t, "three readings of the stage's watermarks, or a stop", func() bool { return jm.Served("watermarks") >= 3 || jm.Served("stop") > 0 })
	if n := jm.Served("stop"); n != 0 {
		t.Fatalf("stopped %d times while the stage's input had not ended", n)
	}
	jm.EndInput(name)
	checkStoppedOnce(t, jm, name, done)
}

// A job whose ID stops answering (a JobManager restarted without HA) is
// looked up again by its name, and the new ID is the one stopped.
func TestDrainFollowsANewJobID(t *testing.T) {
	const name = "orders-root-1-a"
	jm := flinkjobtest.New(t, name)
	done := drain(t, jm, time.Minute)
	flinkjobtest.Await(t, "a reading of the stage's watermarks", func() bool { return jm.Served("watermarks") >= 1 })
	jm.SetJob(name, "job9", "", 0)
	jm.EndInput(name)
	checkStoppedOnce(t, jm, name, done)
}

// A job that is no longer live is left alone.
func TestDrainLeavesAJobThatEnded(t *testing.T) {
	const name = "orders-root-1-a"
	jm := flinkjobtest.New(t, name)
	jm.SetJob(name, "", "CANCELED", 0)
	if err := <-drain(t, jm, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := jm.Served("stop"); n != 0 {
		t.Errorf("stopped a cancelled job %d times", n)
	}
}

// A REST API that keeps failing ends the drain after the patience, with
// ErrNoAnswer; a stop the JobManager refuses is quoted with its reason.
func TestDrainFailures(t *testing.T) {
	const name = "orders-root-1-a"
	t.Run("unavailable", func(t *testing.T) {
		jm := flinkjobtest.New(t, name)
		jm.SetFault(func(string) int { return http.StatusServiceUnavailable })
		if err := <-drain(t, jm, 50*time.Millisecond); !errors.Is(err, ErrNoAnswer) {
			t.Errorf("got %v, want ErrNoAnswer", err)
		}
	})
	t.Run("stop refused", func(t *testing.T) {
		jm := flinkjobtest.New(t, name)
		jm.EndInput(name)
		jm.NoSavepointDir()
		err := <-drain(t, jm, time.Minute)
		if err == nil || !strings.Contains(err.Error(), "state.savepoints.dir") || !strings.Contains(err.Error(), "POST /jobs/job0/stop: 400") {
			t.Errorf("got %v, want the refused stop and state.savepoints.dir", err)
		}
	})
}

// While a drain of a job runs in this process, another DrainOnce of it
// starts nothing, one of the same name on another REST address starts;
// once the first ended, having stopped the job once, one may start again.
func TestDrainOnce(t *testing.T) {
	const name = "orders-root-1-a"
	jm, elsewhere := flinkjobtest.New(t, name), flinkjobtest.New(t, name)
	once := func(jm *flinkjobtest.JobManager) <-chan error {
		return DrainOnce(jm.Addr(), "orders", 10*time.Millisecond, time.Minute)
	}
	first := once(jm)
	if first == nil {
		t.Fatal("the first drain did not start")
	}
	if once(jm) != nil {
		t.Error("a second drain of the job started while the first ran")
	}
	other := once(elsewhere)
	if other == nil {
		t.Fatal("the drain of the job on another REST address did not start")
	}
	jm.EndInput(name)
	elsewhere.EndInput(name)
	checkStoppedOnce(t, jm, name, first)
	checkStoppedOnce(t, elsewhere, name, other)
	again := once(jm)
	if again == nil {
		t.Fatal("no drain started after the first one ended")
	}
	if err := <-again; err != nil {
		t.Errorf("the drain of a job that ended: %v", err)
	}
}
