package integration

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
)

// Dataflow's translation, without a network: Beam Go's Dataflow runner
// with --dry_run translates the pipeline into the job it would submit and
// logs the pipeline proto and the job, then returns. The quickstart is
// translated bounded (its default) and unbounded (--idle=0).
//
// Both are streaming jobs: in Beam Go 2.77 a DoFn whose ProcessElement
// returns an sdf.ProcessContinuation has an unbounded output
// (core/graph/edge.go, newDoFnNode, line 433), and the read checkpoints
// itself after every bundle, bounded or not, so that its acks wait for
// the runner's commit.

// dryRunArgs are the flags of a Dataflow dry run; the staging bucket is
// never reached (its check only warns).
var dryRunArgs = []string{
	"--runner=dataflow", "--dry_run",
	"--project=pubsubio-dry-run", "--region=us-central1",
	"--staging_location=gs://pubsubio-dry-run/staging",
	"--subscription=orders",
}

// dryRun is what a dry run logged: the pipeline proto as text and the
// Dataflow job.
type dryRun struct {
	pipeline string
	job      struct {
		Type        string
		Environment struct {
			Experiments []string
		}
	}
}

// translate runs bin with the dry-run flags plus extra and returns what it
// logged.
func translate(t *testing.T, bin string, extra ...string) dryRun {
	t.Helper()
	p := crash.Start(t, bin, "dry-run", append(dryRunArgs, extra...)...)
	if err := p.Wait(time.Minute); err != nil {
		t.Fatal(err)
	}
	var out dryRun
	for _, line := range strings.Split(p.Stderr(), "\n") {
		msg := loggedMessage(line)
		switch {
		case strings.HasPrefix(msg, "components:"):
			out.pipeline = msg
		case strings.HasPrefix(msg, "{") && strings.Contains(msg, `"environment"`):
			if err := json.Unmarshal([]byte(msg), &out.job); err != nil {
				t.Fatalf("the translated job is not JSON: %v\n%s", err, crash.Tail(msg, 2000))
			}
		}
	}
	if out.pipeline == "" || out.job.Type == "" {
		t.Fatalf("the dry run logged no pipeline or no job; stderr tail:\n%s", crash.Tail(p.Stderr(), 3000))
	}
	return out
}

// loggedMessage returns the msg of a Beam log line (slog's text format,
// msg="..." quoted as Go quotes strings), or "".
func loggedMessage(line string) string {
	i := strings.Index(line, ` msg="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(" msg="):]
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return ""
	}
	msg, err := strconv.Unquote(q)
	if err != nil {
		return ""
	}
	return msg
}

func TestDataflowDryRunTranslatesTheQuickstart(t *testing.T) {
	t.Parallel()
	bin := crash.Build(t, "github.com/pubsubio/beam-pubsubio/examples/quickstart", "quickstart")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bounded", nil},
		{"unbounded", []string{"--idle=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := translate(t, bin, tc.args...)
			if got.job.Type != "JOB_TYPE_STREAMING" {
				t.Errorf("job type %s, want JOB_TYPE_STREAMING", got.job.Type)
			}
			if !slices.Contains(got.job.Environment.Experiments, "enable_streaming_engine") {
				t.Errorf("experiments %v lack enable_streaming_engine", got.job.Environment.Experiments)
			}
			for _, want := range []string{
				`unique_name:"pubsubio.Read/source.readFn"`,    // the read's SDF
				`"beam:requirement:pardo:splittable_dofn:v1"`,  // declared as one
				`unique_name:"pubsubio.Read/source.prepareFn"`, // the prepare step
				`urn:"beam:artifact:role:go_worker_binary:v1"`, // the staged worker
				`beam_go_sdk:2.77.0`,                           // its container
			} {
				if !strings.Contains(got.pipeline, want) {
					t.Errorf("the translated pipeline lacks %s", want)
				}
			}
			// Transforms only Dataflow itself can run, which Prism and Flink
			// reject: Beam's own io/pubsubio emits these.
			for _, unwanted := range []string{"beam:transform:pubsub_read:v1", "beam:transform:pubsub_write:v1"} {
				if strings.Contains(got.pipeline, unwanted) {
					t.Errorf("the translated pipeline holds %s, a runner-replaced transform", unwanted)
				}
			}
			if !strings.Contains(got.pipeline, "is_bounded:UNBOUNDED") {
				t.Error("the pipeline has no unbounded PCollection; the read's output is one")
			}
			t.Logf("%s: a %s job with the read's splittable DoFn and no runner-replaced transform", tc.name, got.job.Type)
		})
	}
}
