package source

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/google/go-cmp/cmp"
)

// The flags become Beam Java pipeline options: the interval with
// finishBundleBeforeCheckpointing, each name=value typed as it reads.
func TestFlinkJobOptions(t *testing.T) {
	got, err := flinkJobOptions(2*time.Second, []string{"operatorChaining=false", "maxParallelism=8", "stateBackend=hashmap", "savepointPath=/s/a=b"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"checkpointingInterval": int64(2000), "finishBundleBeforeCheckpointing": true,
		"operatorChaining": false, "maxParallelism": int64(8), "stateBackend": "hashmap", "savepointPath": "/s/a=b",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	if got, err := flinkJobOptions(0, nil); err != nil || len(got) != 0 {
		t.Errorf("interval 0: %v, %v; want no options", got, err)
	}
}

// Bad flag values are refused at construction, naming the flag and the
// value.
func TestFlinkJobOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		pairs    []string
		want     string
	}{
		{-time.Second, nil, "--pubsubio_flink_checkpointing -1s"},
		{time.Millisecond, nil, "--pubsubio_flink_checkpointing 1ms"},
		{2 * time.Hour, nil, "--pubsubio_flink_checkpointing 2h0m0s"},
		{time.Second, []string{"operatorChaining"}, `--pubsubio_flink_option "operatorChaining" is not name=value`},
		{time.Second, []string{"=1"}, `--pubsubio_flink_option "=1"`},
	} {
		if _, err := flinkJobOptions(c.interval, c.pairs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("flinkJobOptions(%v, %q) = %v, want an error containing %s", c.interval, c.pairs, err, c.want)
		}
	}
}

// Without --job_name, a read on Flink names the job as Beam would and
// looks for its checkpoints under that name.
func TestPrepareFlinkJobNamesTheJob(t *testing.T) {
	saved := *jobopts.JobName
	t.Cleanup(func() { *jobopts.JobName = saved })
	*jobopts.JobName = ""
	cfg := Config{Commit: CommitFlinkCheckpoint, Flink: FlinkCheckpoints{REST: "jm:8081"}}
	if err := prepareFlinkJob(&cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(*jobopts.JobName, "go-job-") || cfg.Flink.Job != *jobopts.JobName {
		t.Errorf("job name %q, Flink.Job %q; want a go-job- name for both", *jobopts.JobName, cfg.Flink.Job)
	}
}
