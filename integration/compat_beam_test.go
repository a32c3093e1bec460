package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	v1pb "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/protox"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

// Programs written for Beam's io/pubsubio, with only the import changed:
// Beam's own example runs on Prism, and on Dataflow a pipeline becomes the
// job Beam's package makes of it.

const (
	beamPubsubio   = "github.com/apache/beam/sdks/v2/go/pkg/beam/io/pubsubio"
	dropInPubsubio = "github.com/pubsubio/beam-pubsubio/pubsubio/io/pubsubio"
	beamModule     = "github.com/apache/beam/sdks/v2"
)

// goCommand runs the go command with args in dir and returns its standard
// output, failing the test with its output on an error.
func goCommand(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	// Only the module in dir decides what is built: no workspace, no
	// flags from the environment, no other toolchain.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// beamFile reads a file of the Beam module this module requires, from the
// module cache.
func beamFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goCommand(t, ".", "list", "-m", "-f", "{{.Dir}}", beamModule), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// withImport is src, which imports Beam's io/pubsubio, importing path
// instead; nothing else changes.
func withImport(t *testing.T, src, path string) string {
	t.Helper()
	old := strconv.Quote(beamPubsubio)
	if n := strings.Count(src, old); n != 1 {
		t.Fatalf("the program imports %s %d times, want once", old, n)
	}
	return strings.Replace(src, old, strconv.Quote(path), 1)
}

// buildInThisModule builds the program src, which may import this
// module's packages, as a file outside it compiled against this module.
func buildInThisModule(t *testing.T, src, name string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name+".go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return crash.Build(t, file, name)
}

// Beam's own example streaming_wordcap, its import of io/pubsubio changed
// to the drop-in package and nothing else, runs on Prism against the
// emulator: it publishes three words with Beam's pubsubx (which finds the
// emulator through PUBSUB_EMULATOR_HOST), reads them back through the
// drop-in Read (told where the emulator is by --pubsubio_emulator) and
// logs them in upper case. It runs until stopped, like on Dataflow.
func TestBeamExampleWordcapOnPrism(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	src := withImport(t, beamFile(t, "go/examples/streaming_wordcap/wordcap.go"), dropInPubsubio)
	bin := buildInThisModule(t, src, "wordcap")
	client := e.Client(t)
	topic := fmt.Sprintf("wordcap-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { // the example deletes its topic only when it exits by itself
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		name := "projects/" + e.Project + "/topics/" + topic
		it := client.TopicAdminClient.ListTopicSubscriptions(ctx, &pubsubpb.ListTopicSubscriptionsRequest{Topic: name})
		for sub, err := it.Next(); err != iterator.Done && err == nil; sub, err = it.Next() {
			_ = client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: sub})
		}
		_ = client.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: name})
	})
	t.Setenv("PUBSUB_EMULATOR_HOST", e.Endpoint) // for the example's own publisher; pubsubio ignores it
	p := crash.Start(t, bin, "wordcap", "--project="+e.Project, "--input="+topic, "--pubsubio_emulator="+e.Endpoint)
	for _, word := range []string{"FOO", "BAR", "BAZ"} {
		if err := p.AwaitStderrLine("Elm: "+word, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if !p.Kill() {
		t.Errorf("wordcap exited by itself (%v); a streaming pipeline runs until stopped", p.Err())
	}
}

// dryRunProgram uses every form of Read and Write; %s is the import path
// of the io/pubsubio package.
const dryRunProgram = `package main

import (
	"context"
	"flag"
	"log"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"%s"
)

func main() {
	flag.Parse()
	beam.Init()
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, "my-project", pubsubio.ReadOptions{Topic: "events", IDAttribute: "id", TimestampAttribute: "ts", WithAttributes: true})
	pubsubio.Write(s, "my-project", "copies", msgs)
	payloads := pubsubio.Read(s, "my-project", pubsubio.ReadOptions{Subscription: "orders"})
	pubsubio.Write(s, "my-project", "orders-copy", payloads)
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}
`

// beamsGenproto is the google.golang.org/genproto version Beam's go.mod
// requires, and beamsGenprotoSums its go.sum lines: buildWithBeams builds
// with them and verifies nothing else.
const beamsGenproto = "v0.0.0-20260715232425-e75dac1f907d"

var beamsGenprotoSums = []string{
	"google.golang.org/genproto " + beamsGenproto + " h1:C9v1o0/4quuhOAfmRXA2j+we0PqZIp8traLdeogF3Ms=",
	"google.golang.org/genproto " + beamsGenproto + "/go.mod h1:Wz2wFJntZFmLGo7pLDXZ3wYk5hyc0Mb+SkHhDDXT+lU=",
}

// buildWithBeams builds src, which imports Beam's io/pubsubio, in a module
// of its own: this module's requirements and sums, with
// google.golang.org/genproto at the version Beam requires (pinned above).
// Beam's package names its message type through genproto's
// googleapis/pubsub/v1, which the genproto version this module needs (for
// cloud.google.com/go/pubsub/v2) no longer has, so Beam's package does not
// compile in this module, nor in a user's that adds it. The build is
// read-only: it may download the pinned versions, and fails rather than
// resolve anything else.
func buildWithBeams(t *testing.T, src string) string {
	t.Helper()
	genproto := regexp.MustCompile(`(?m)^\s*google\.golang\.org/genproto (v\S+)`).FindStringSubmatch(beamFile(t, "go.mod"))
	if genproto == nil || genproto[1] != beamsGenproto {
		t.Fatalf("Beam's go.mod requires google.golang.org/genproto %v, not the pinned %s: update beamsGenproto and its sums (go mod download -json google.golang.org/genproto@VERSION)", genproto, beamsGenproto)
	}
	root := filepath.Dir(goCommand(t, ".", "env", "GOMOD"))
	dir := t.TempDir()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(mod, []byte("module beamsdryrun"))
	mod = append(mod, "\nreplace google.golang.org/genproto => google.golang.org/genproto "+beamsGenproto+"\n"...)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	sum = append(sum, strings.Join(beamsGenprotoSums, "\n")+"\n"...)
	for name, content := range map[string][]byte{"go.mod": mod, "go.sum": sum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	goCommand(t, dir, "build", "-mod=readonly", "-o", "beams", ".")
	t.Logf("built the program with Beam's io/pubsubio in %v", time.Since(start).Round(time.Millisecond))
	return filepath.Join(dir, "beams")
}

// dataflowDryRun runs bin for Dataflow without submitting anything and
// returns the pipeline the runner logged and the job it translated it to.
func dataflowDryRun(t *testing.T, bin string, extra ...string) (*pipepb.Pipeline, map[string]any) {
	t.Helper()
	args := append([]string{"--runner=dataflow", "--dry_run", "--project=my-project", "--region=us-central1", "--staging_location=gs://bucket/staging"}, extra...)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, crash.Tail(string(out), 3000))
	}
	var model *pipepb.Pipeline
	var job map[string]any
	for _, line := range strings.Split(string(out), "\n") {
		_, quoted, ok := strings.Cut(line, " msg=")
		if !ok {
			continue
		}
		msg, err := strconv.Unquote(quoted)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(msg, "components:"):
			model = &pipepb.Pipeline{}
			if err := prototext.Unmarshal([]byte(msg), model); err != nil {
				t.Fatalf("the logged pipeline does not parse: %v", err)
			}
		case strings.HasPrefix(msg, "{"):
			if err := json.Unmarshal([]byte(msg), &job); err != nil {
				t.Fatalf("the logged job does not parse: %v", err)
			}
		}
	}
	if model == nil || job == nil {
		t.Fatalf("%s logged no pipeline or no job:\n%s", filepath.Base(bin), crash.Tail(string(out), 3000))
	}
	return model, job
}

// comparable is a pipeline as Dataflow sees it, less where the worker's
// functions live: each ParDo's function is named by its package name and
// function name only ("pubsubio.unmarshalMessageFn"), since Beam's are in
// Beam's package and the drop-in's in its own, of the same name.
func comparable(t *testing.T, p *pipepb.Pipeline) *pipepb.Pipeline {
	t.Helper()
	p = proto.Clone(p).(*pipepb.Pipeline)
	p.RootTransformIds = nil // the order varies from run to run
	for id, tr := range p.GetComponents().GetTransforms() {
		if tr.GetSpec().GetUrn() != "beam:transform:pardo:v1" {
			continue
		}
		var pardo pipepb.ParDoPayload
		if err := proto.Unmarshal(tr.GetSpec().GetPayload(), &pardo); err != nil {
			t.Fatalf("transform %s: %v", id, err)
		}
		var fn v1pb.TransformPayload
		if err := protox.DecodeBase64(string(pardo.GetDoFn().GetPayload()), &fn); err != nil {
			t.Fatalf("transform %s: %v", id, err)
		}
		if user := fn.GetEdge().GetFn().GetFn(); user != nil {
			user.Name = path.Base(user.GetName())
		}
		pardo.DoFn.Payload = []byte(prototext.Format(&fn))
		tr.Spec.Payload = protox.MustEncode(&pardo)
	}
	return p
}

// volatileJobFields differ between any two translations of one program.
var volatileJobFields = map[string]bool{"name": true, "pipelineUrl": true, "pipelineProtoHash": true, "location": true, "value": true}

// stripVolatile drops volatileJobFields from a translated job, and the
// display data that repeats the job name.
func stripVolatile(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if !volatileJobFields[k] || k == "value" && x["key"] != "name" {
				out[k] = stripVolatile(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = stripVolatile(val)
		}
		return out
	}
	return v
}

// On Dataflow the drop-in package emits Beam's native transforms with
// Beam's payloads: built against each package, the same program gives the
// same pipeline (but for where the worker's functions live) and the same
// translated job. With --pubsubio_portable_on_dataflow it runs pubsubio's
// own read and write instead.
func TestDropInDataflowJobIsBeams(t *testing.T) {
	if isolated(t) {
		return
	}
	ours := buildInThisModule(t, fmt.Sprintf(dryRunProgram, dropInPubsubio), "dryrun")
	beams := buildWithBeams(t, fmt.Sprintf(dryRunProgram, beamPubsubio))
	beamModel, beamJob := dataflowDryRun(t, beams)
	ourModel, ourJob := dataflowDryRun(t, ours)

	urns := map[string]int{}
	for _, tr := range beamModel.GetComponents().GetTransforms() {
		urns[tr.GetSpec().GetUrn()]++
	}
	if urns["beam:transform:pubsub_read:v1"] != 2 || urns["beam:transform:pubsub_write:v1"] != 2 {
		t.Fatalf("Beam's pipeline has transforms %v; want 2 native reads and 2 native writes", urns)
	}
	if diff := cmp.Diff(comparable(t, beamModel), comparable(t, ourModel), protocmp.Transform()); diff != "" {
		t.Errorf("the pipeline Dataflow gets (-Beam's package +the drop-in):\n%s", diff)
	}
	// Display data and lists of options come in map order.
	anyOrder := cmpopts.SortSlices(func(a, b any) bool { return fmt.Sprint(a) < fmt.Sprint(b) })
	if diff := cmp.Diff(stripVolatile(beamJob), stripVolatile(ourJob), anyOrder); diff != "" {
		t.Errorf("the translated job (-Beam's package +the drop-in):\n%s", diff)
	}

	portable, _ := dataflowDryRun(t, ours, "--pubsubio_portable_on_dataflow")
	for id, tr := range portable.GetComponents().GetTransforms() {
		if strings.HasPrefix(tr.GetSpec().GetUrn(), "beam:transform:pubsub_") {
			t.Errorf("with --pubsubio_portable_on_dataflow, transform %s (%s) is Dataflow's native %s", id, tr.GetUniqueName(), tr.GetSpec().GetUrn())
		}
	}
}
