package source

import (
	"strings"
	"testing"
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
