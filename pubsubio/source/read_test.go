package source

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
		{"flink without a job name", Config{Commit: CommitAuto, Flink: FlinkCheckpoints{REST: "jm:8081"}}, deployment{runner: "flink"}, CommitFlinkCheckpoint, ""},
		{"checkpoints elsewhere without a job name", Config{Commit: CommitFlinkCheckpoint, Flink: FlinkCheckpoints{REST: "jm:8081"}}, deployment{runner: "universal"}, "", "--job_name"},
		{"REST a URL", Config{Commit: CommitFlinkCheckpoint, Flink: FlinkCheckpoints{REST: "http://jm", Job: "j"}}, deployment{}, "", "Flink.REST \"http://jm\" has a scheme"},
		{"REST from the flag, a URL", Config{Commit: CommitFlinkCheckpoint, Flink: FlinkCheckpoints{Job: "j"}}, deployment{flinkREST: "http://jm:8081"}, "", "--pubsubio_flink_rest \"http://jm:8081\" has a scheme"},
		{"a blank job name", Config{Commit: CommitFlinkCheckpoint, Flink: FlinkCheckpoints{REST: "jm:8081", Job: "   "}}, deployment{}, "", "Flink.Job \"   \" is blank"},
		{"a job name with spaces", Config{Commit: CommitFlinkCheckpoint, Flink: FlinkCheckpoints{REST: "jm:8081"}}, deployment{jobName: " orders"}, "", "--job_name \" orders\" has spaces around it"},
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

// Under CommitFlinkCheckpoint the budget defaults to the Flink budget, a
// stream's window is its whole share of it and a bundle may emit what a
// split's streams hold; elsewhere the defaults stay; values the read sets
// are kept.
func TestWithCommitDefaults(t *testing.T) {
	type limits struct{ Budget, Window, WindowBytes, Bundle int }
	cases := []struct {
		name   string
		commit CommitMode
		set    Config
		want   limits
	}{
		{"resume", CommitResume, Config{},
			limits{DefaultBufferMaxMessages, DefaultMaxOutstandingMessages, DefaultBufferMaxBytes / 2, DefaultMaxRecordsPerBundle}},
		{"checkpoints", CommitFlinkCheckpoint, Config{},
			limits{DefaultFlinkBufferMaxMessages, DefaultFlinkBufferMaxMessages / 2, DefaultFlinkBufferMaxBytes / 2, DefaultFlinkBufferMaxMessages}},
		{"checkpoints, budget set", CommitFlinkCheckpoint, Config{BufferMaxMessages: 8000, BufferMaxBytes: 8 << 20},
			limits{8000, 4000, 4 << 20, 8000}},
		{"checkpoints, window set", CommitFlinkCheckpoint, Config{MaxOutstandingMessages: 3000, MaxOutstandingBytes: 1 << 20},
			limits{DefaultFlinkBufferMaxMessages, 3000, 1 << 20, 6000}},
		{"checkpoints, bundle set", CommitFlinkCheckpoint, Config{MaxRecordsPerBundle: 50},
			limits{DefaultFlinkBufferMaxMessages, DefaultFlinkBufferMaxMessages / 2, DefaultFlinkBufferMaxBytes / 2, 50}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t, func(cfg *Config) {
				cfg.ParallelPullCount = 2
				cfg.MaxOutstandingMessages, cfg.MaxOutstandingBytes = c.set.MaxOutstandingMessages, c.set.MaxOutstandingBytes
				cfg.BufferMaxMessages, cfg.BufferMaxBytes = c.set.BufferMaxMessages, c.set.BufferMaxBytes
				cfg.MaxRecordsPerBundle = c.set.MaxRecordsPerBundle
			})
			cfg.Commit = c.commit
			got := cfg.withCommitDefaults(c.set)
			if diff := cmp.Diff(c.want, limits{got.BufferMaxMessages, got.MaxOutstandingMessages, got.MaxOutstandingBytes, got.MaxRecordsPerBundle}); diff != "" {
				t.Errorf("budget, window, window bytes, bundle cap (-want +got):\n%s", diff)
			}
		})
	}
}
