package source

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/jobprep"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
)

// defaultFlinkCheckpointing is --pubsubio_flink_checkpointing's default.
const defaultFlinkCheckpointing = 2 * time.Second

// The flags that set, for a pipeline submitted to Flink with a read under
// CommitFlinkCheckpoint, what that read needs of the job: checkpoints,
// each after the open bundles finished. Beam Go cannot send Flink's
// pipeline options itself (internal/jobprep).
var (
	flinkCheckpointingFlag = flag.Duration("pubsubio_flink_checkpointing", defaultFlinkCheckpointing,
		"with --runner=flink and a read acking at Flink checkpoints: the checkpoint interval of the job pubsubio submits "+
			"(Beam's checkpointingInterval, with finishBundleBeforeCheckpointing); 0 leaves the job's options alone")
	flinkOptionFlag optionList
)

func init() {
	flag.Var(&flinkOptionFlag, "pubsubio_flink_option",
		"name=value, repeatable: a Beam Java pipeline option added to the Flink job pubsubio submits, e.g. operatorChaining=false (docs/runners.md, Running on Flink)")
}

// optionList collects a repeated flag's values.
type optionList []string

func (o *optionList) String() string     { return strings.Join(*o, " ") }
func (o *optionList) Set(v string) error { *o = append(*o, v); return nil }

// prepareFlinkJob names the job when --job_name is not set, so that the
// read can find it, and adds to the job the options the flags ask for.
// It runs once the read knows it acks at Flink checkpoints, on the
// launcher, before the job is submitted.
func prepareFlinkJob(cfg *Config) error {
	if *jobopts.JobName == "" && cfg.Flink.Job == "" {
		*jobopts.JobName = jobopts.GetJobName() // Beam's own: go-job-<n>-<ns>
	}
	if cfg.Flink.Job == "" {
		cfg.Flink.Job = *jobopts.JobName
	}
	options, err := flinkJobOptions(*flinkCheckpointingFlag, flinkOptionFlag)
	if err == nil {
		err = jobprep.AddOptions(options)
	}
	return construct.Invalid("pubsubio.Read", err)
}

// flinkJobOptions are the Beam Java pipeline options of a checkpoint
// interval (none if zero) and of name=value pairs.
func flinkJobOptions(interval time.Duration, pairs []string) (map[string]any, error) {
	options := map[string]any{}
	switch {
	case interval < 0 || interval > 0 && interval < 10*time.Millisecond || interval > time.Hour:
		return nil, fmt.Errorf("--pubsubio_flink_checkpointing %v is out of range: use 10ms to 1h, or 0 to leave the job's checkpoints to its own options", interval)
	case interval > 0:
		options["checkpointingInterval"] = interval.Milliseconds()
		options["finishBundleBeforeCheckpointing"] = true
	}
	for _, pair := range pairs {
		name, value, ok := strings.Cut(pair, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--pubsubio_flink_option %q is not name=value; use e.g. --pubsubio_flink_option=operatorChaining=false", text.Truncate(pair, text.MaxQuoted))
		}
		options[name] = optionValue(value)
	}
	return options, nil
}

// optionValue is value as a pipeline option: a bool, an integer, or else
// the string.
func optionValue(value string) any {
	if value == "true" || value == "false" {
		return value == "true"
	}
	if n, err := strconv.ParseInt(value, 10, 64); err == nil {
		return n
	}
	return value
}
