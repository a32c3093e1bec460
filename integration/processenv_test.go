package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/proc"
)

// A worker started the way Dataflow starts one: Prism runs as a standalone
// job server and, with --environment_type=PROCESS, starts the Go SDK
// container's boot program (github.com/apache/beam/sdks/v2/go/container,
// built from the Beam module), which fetches the staged worker binary
// from Prism's artifact service and runs it. That process never built the
// pipeline: every DoFn, type and coder it meets must be registered.

// processRunLimit bounds one job of these tests: a few hundred messages,
// read bounded, and the examples, each a few seconds' work.
const processRunLimit = 3 * time.Minute

// bootPackage is the Go SDK container's boot program.
const bootPackage = "github.com/apache/beam/sdks/v2/go/container"

// unquotedBoot writes a script that runs boot with Prism's --id flag
// unquoted, and returns its path. Prism 2.77 passes --id='ID' with the
// quotes in the value (runners/prism/internal/environments.go, line 318):
// the boot program then presents "'ID'" as its worker ID and Prism's
// provision service refuses it ("not registered in worker pool"), so the
// worker never starts. The script changes nothing else.
func unquotedBoot(t *testing.T, boot string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "boot.sh")
	body := "#!/bin/sh\n" +
		"for arg do\n" +
		"  shift\n" +
		"  case $arg in --id=\\'*\\') arg=--id=${arg#--id=\\'}; arg=${arg%\\'} ;; esac\n" +
		"  set -- \"$@\" \"$arg\"\n" +
		"done\n" +
		"exec " + strconv.Quote(boot) + " \"$@\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// processArgs are the flags that submit to this Prism with workers started
// by boot from the staged binary worker.
func (s *prismServer) processArgs(t *testing.T, boot, worker string) []string {
	t.Helper()
	since := time.Now()
	t.Cleanup(func() {
		n, err := proc.RemoveBootCopies(worker, since)
		if err != nil {
			t.Error(err)
		}
		t.Logf("removed %d copies of the worker binary that boot left in /tmp", n)
	})
	config, err := json.Marshal(map[string]string{"command": unquotedBoot(t, boot)})
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"--runner=universal", "--endpoint=" + s.Endpoint,
		"--environment_type=PROCESS", "--environment_config=" + string(config),
		"--worker_binary=" + worker,
	}
}

// wantBootStarted fails the test unless the boot program ran under this
// Prism: it prints the provision info it fetched on its stderr, which is
// Prism's.
func (s *prismServer) wantBootStarted(t *testing.T) {
	t.Helper()
	if !strings.Contains(s.proc.Stderr(), "Provision info") {
		t.Errorf("prism's log has no \"Provision info\" line of the boot program: the worker was not started by it; log tail:\n%s", crash.Tail(s.proc.Stderr(), 2000))
	}
}

// Read -> Write, read bounded: every message reaches the output and every
// input message is acked once, by a worker the boot program started.
func TestProcessEnvironmentReadWrite(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	const n = 300
	bin := crash.BuildPipeline(t)
	boot := crash.Build(t, bootPackage, "boot")
	prism := startPrism(t)
	c := crash.NewTopology(t, e, "process-env", n, nil)

	start := time.Now()
	p := crash.Start(t, bin, "submitter", append(prism.processArgs(t, boot, bin), c.Args("--idle_timeout=5s")...)...)
	if err := p.Wait(processRunLimit); err != nil {
		t.Fatalf("%v; prism log tail:\n%s", err, crash.Tail(prism.proc.Stderr(), 4000))
	}
	if !strings.Contains(p.Stdout(), crash.DoneLine) {
		t.Fatalf("the job ended without %q; stdout:\n%s", crash.DoneLine, p.Stdout())
	}
	prism.wantBootStarted(t)
	c.Verify(t, "process-environment", 0, 0, 1, time.Since(start))
	var wrong []string
	for _, id := range c.InputIDs() {
		if m := srv.Message(id); m.Acks != 1 {
			wrong = append(wrong, fmt.Sprintf("%s(acks=%d deliveries=%d)", id, m.Acks, m.Deliveries))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of %d input messages not acked exactly once: %v", len(wrong), n, wrong[:min(10, len(wrong))])
	}
}

// The examples that publish dead letters and count windows, each checking
// what it reads back, run with their workers started by the boot program.
func TestProcessEnvironmentExamples(t *testing.T) {
	t.Parallel()
	boot := crash.Build(t, bootPackage, "boot")
	prism := startPrism(t)
	for _, example := range []string{"deadletters", "windowedcounts"} {
		t.Run(example, func(t *testing.T) {
			bin := crash.Build(t, "github.com/pubsubio/beam-pubsubio/examples/"+example, example)
			p := crash.Start(t, bin, example, prism.processArgs(t, boot, bin)...)
			if err := p.Wait(processRunLimit); err != nil {
				t.Fatalf("%v; prism log tail:\n%s", err, crash.Tail(prism.proc.Stderr(), 4000))
			}
			prism.wantBootStarted(t)
			lines := strings.Split(strings.TrimSpace(p.Stdout()), "\n")
			t.Logf("%s: %s", example, strings.Join(lines[max(0, len(lines)-2):], " / "))
		})
	}
}
