package source

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeJobManager answers the REST calls a checkpoint watcher makes, for the
// jobs it lists, with the latest completed checkpoint it is told.
type fakeJobManager struct {
	srv *httptest.Server

	mu          sync.Mutex
	jobs        []map[string]string
	interval    int64 // the job's checkpoint interval; 0 answers 404, as Flink does for a job that does not checkpoint
	lastTrigger time.Time
}

func newFakeJobManager(t *testing.T, jobNames ...string) *fakeJobManager {
	f := &fakeJobManager{interval: 1000}
	for i, n := range jobNames {
		f.jobs = append(f.jobs, map[string]string{"jid": string(rune('a' + i)), "name": n, "state": "RUNNING"})
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeJobManager) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/jobs/overview":
		json.NewEncoder(w).Encode(map[string]any{"jobs": f.jobs})
	case strings.HasSuffix(r.URL.Path, "/checkpoints/config"):
		if f.interval == 0 {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"interval": f.interval})
	case strings.HasSuffix(r.URL.Path, "/checkpoints"):
		latest := map[string]any{}
		if !f.lastTrigger.IsZero() {
			latest["completed"] = map[string]any{"trigger_timestamp": f.lastTrigger.UnixMilli()}
		}
		json.NewEncoder(w).Encode(map[string]any{"latest": latest})
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeJobManager) completed(trigger time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastTrigger = trigger
}

func (f *fakeJobManager) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// flinkHarness is a split reader whose acks wait for the fake job
// manager's checkpoints, on the real clock (the watcher compares the
// JobManager's trigger times with the worker's).
func flinkHarness(t *testing.T, jm *fakeJobManager, job string) *readerHarness {
	cfg := testConfig(t, func(c *Config) {
		c.Commit = CommitFlinkCheckpoint
		c.Flink = FlinkCheckpoints{REST: jm.addr(), Job: job}
	})
	h := newReaderHarness(t, cfg) // its reader watches the checkpoints
	h.r.now = time.Now
	return h
}

// A bundle's messages are acked once a checkpoint triggered after the
// split's next bundle began has completed, not before.
func TestFlinkCheckpointCoversWhatItBegan(t *testing.T) {
	jm := newFakeJobManager(t, "orders0job-root-1202-1a2b", "other-root-1202-3c4d")
	h := flinkHarness(t, jm, "orders_job")
	run := h.poll()
	hs := deliverN(h.r, run, "m", 3)
	emitted := ackIDsOf(drain(h.r, 3, 0))
	jm.completed(time.Now().Add(-time.Minute)) // before the next bundle begins

	next := Restriction{Seq: 1, Owner: processID, AckIDs: emitted}
	if _, err := h.r.beginBundle(bundleContext(), next, 10); err != nil {
		t.Fatal(err)
	}
	for i, hd := range hs {
		hd.check(t, "before a checkpoint covers it, message "+string(rune('0'+i)), 0, 0)
	}
	began := time.Now()
	jm.completed(began.Add(checkpointSkew + time.Second))
	awaitCondition(t, "the watcher sees the checkpoint", func() bool {
		ok, err := h.r.checkpoints.covered(began)
		return ok || err != nil
	})
	if _, err := h.r.beginBundle(bundleContext(), Restriction{Seq: 2, Owner: processID}, 10); err != nil {
		t.Fatal(err)
	}
	for _, hd := range hs {
		hd.check(t, "once a checkpoint triggered after the next bundle began completed", 1, 0)
	}
	h.checkCount("acks_via_checkpoint", acksCheckpoint, 3)
}

// A job that does not checkpoint never makes output durable: the read
// fails, saying so, instead of holding every message until its lease ends.
func TestFlinkCheckpointingOffFailsTheRead(t *testing.T) {
	jm := newFakeJobManager(t, "nocheckpoints-root-1202-1a2b")
	jm.interval = 0
	h := flinkHarness(t, jm, "nocheckpoints")
	h.poll()
	awaitCondition(t, "the watcher finds the job does not checkpoint", func() bool {
		_, err := h.r.checkpoints.covered(time.Now())
		return err != nil
	})
	_, err := h.r.beginBundle(bundleContext(), Restriction{Seq: 1, Owner: processID, AckIDs: []string{"x"}}, 10)
	if err == nil || !strings.Contains(err.Error(), "does not checkpoint") || !strings.Contains(err.Error(), "checkpointingInterval") {
		t.Errorf("bundle error %v, want one saying the job does not checkpoint and naming checkpointingInterval", err)
	}
}

// Beam's Flink runner names the Flink job after the Beam job: lower case,
// every other character a 0, then -user-date-random.
func TestFlinkJobName(t *testing.T) {
	if got := flinkJobName("my_Orders-job.2"); got != "my0orders0job02" {
		t.Errorf("flinkJobName = %q, want my0orders0job02", got)
	}
}

// CommitAuto is a checkpoint on Flink and the next bundle elsewhere;
// --pubsubio_commit overrides it. On Flink the REST address and the job's
// name are required, from the read or the flags.
func TestWithCommit(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		d       deployment
		want    CommitMode
		wantErr string
	}{
		{"prism", Config{Commit: CommitAuto}, deployment{runner: "prism"}, CommitResume, ""},
		{"flink with the flags", Config{Commit: CommitAuto}, deployment{runner: "flink", jobName: "j", flinkREST: "jm:8081"}, CommitFlinkCheckpoint, ""},
		{"flink, told to resume", Config{Commit: CommitAuto}, deployment{runner: "flink", commit: CommitResume}, CommitResume, ""},
		{"flink without REST", Config{Commit: CommitAuto}, deployment{runner: "flink", jobName: "j"}, "", "needs Flink.REST"},
		{"flink without a job name", Config{Commit: CommitAuto, Flink: FlinkCheckpoints{REST: "jm:8081"}}, deployment{runner: "flink"}, "", "--job_name"},
		{"REST a URL", Config{Commit: CommitFlinkCheckpoint, Flink: FlinkCheckpoints{REST: "http://jm", Job: "j"}}, deployment{}, "", "Flink.REST \"http://jm\" has a scheme"},
		{"unknown flag value", Config{Commit: CommitAuto}, deployment{commit: "SOMETIMES"}, "", "--pubsubio_commit"},
		{"the read's own mode wins", Config{Commit: CommitResume}, deployment{runner: "flink", commit: CommitFlinkCheckpoint}, CommitResume, ""},
	}
	for _, c := range cases {
		got, err := c.cfg.withCommit(c.d)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.wantErr)
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: error %v", c.name, err)
		case c.wantErr == "" && got.Commit != c.want:
			t.Errorf("%s: Commit %s, want %s", c.name, got.Commit, c.want)
		}
	}
}

// Under CommitFlinkCheckpoint a stream's window is its whole share of the
// budget and a bundle may emit what a split's streams hold; elsewhere the
// defaults stay; values the read sets are kept.
func TestWithCommitDefaults(t *testing.T) {
	cases := []struct {
		name           string
		commit         CommitMode
		set            Config
		window, bundle int
	}{
		{"resume", CommitResume, Config{}, DefaultMaxOutstandingMessages, DefaultMaxRecordsPerBundle},
		{"checkpoints", CommitFlinkCheckpoint, Config{}, DefaultBufferMaxMessages / 2, DefaultBufferMaxMessages},
		{"checkpoints, window set", CommitFlinkCheckpoint, Config{MaxOutstandingMessages: 3000}, 3000, 6000},
		{"checkpoints, bundle set", CommitFlinkCheckpoint, Config{MaxRecordsPerBundle: 50}, DefaultBufferMaxMessages / 2, 50},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t, func(cfg *Config) {
				cfg.ParallelPullCount = 2
				cfg.MaxOutstandingMessages, cfg.MaxRecordsPerBundle = c.set.MaxOutstandingMessages, c.set.MaxRecordsPerBundle
			})
			cfg.Commit = c.commit
			got := cfg.withCommitDefaults(c.set)
			if got.MaxOutstandingMessages != c.window || got.MaxRecordsPerBundle != c.bundle {
				t.Errorf("MaxOutstandingMessages %d, MaxRecordsPerBundle %d; want %d and %d", got.MaxOutstandingMessages, got.MaxRecordsPerBundle, c.window, c.bundle)
			}
		})
	}
}
