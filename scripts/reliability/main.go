// Command reliability runs the long reliability tests one after another —
// the soak, the memory budget under a stalled downstream, the big crash
// loop, the emulator's stranding of a stopped stream's messages and the
// Flink soak — and prints the figures they log. They are too long for CI's plain
// `go test ./...`, where they skip unless PUBSUB_IT_LONG=1.
//
//	go run ./scripts/reliability                        # all five
//	go run ./scripts/reliability --only=soak --soak=30m
//	go run ./scripts/reliability --only=flinksoak --flink_soak=30m
//
// Each step is one `go test ./integration/` run with its own emulator,
// started by the test harness from the installed cloud-pubsub-emulator
// (or the one named by PUBSUB_IT_EMULATOR); PUBSUB_IT_REQUIRE=1 is set so a
// machine without an emulator fails instead of skipping. A step's whole
// output goes to a log file whose path is printed; the figures are the
// lines the tests tag (SOAK-, BUDGET-, CRASH, STRANDED) and the verdicts.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

var (
	only      = flag.String("only", "soak,budget,crash,stranded,flinksoak", "steps to run, comma separated: soak, budget, crash, stranded, flinksoak")
	soak      = flag.String("soak", "10m", "the soak's duration (PUBSUB_IT_SOAK)")
	flinkSoak = flag.String("flink_soak", "30m", "the Flink soak's duration (PUBSUB_IT_FLINK_SOAK)")
	crashN    = flag.Int("crash_messages", 20000, "messages per crash-loop run (PUBSUB_IT_CRASH_MESSAGES)")
	logDir    = flag.String("logs", "", "directory for the steps' full output (default: a new temp directory)")
	moduleDir = flag.String("C", ".", "the module root (where go.mod is)")
)

// step is one long test run.
type step struct {
	name    string
	run     string        // the go test -run pattern
	timeout time.Duration // go test -timeout
	env     []string
}

func steps() []step {
	return []step{
		{name: "soak", run: "^TestSoakReadWrite$", timeout: soakTimeout(*soak), env: []string{"PUBSUB_IT_SOAK=" + *soak}},
		{name: "budget", run: "^TestBudgetStalledDownstream$", timeout: 75 * time.Minute},
		{name: "crash", run: "TestCrash", timeout: 90 * time.Minute, env: []string{fmt.Sprintf("PUBSUB_IT_CRASH_MESSAGES=%d", *crashN)}},
		{name: "stranded", run: "^TestEmulatorStrandsWhatAStoppedStreamWasSent$", timeout: 20 * time.Minute},
		{name: "flinksoak", run: "^TestFlinkSoak$", timeout: soakTimeout(*flinkSoak) + 15*time.Minute, env: []string{"PUBSUB_IT_FLINK_SOAK=" + *flinkSoak}},
	}
}

// soakTimeout leaves a soak of duration d its duration plus the bounded
// drain, stop and emulator start around it.
func soakTimeout(duration string) time.Duration {
	d, err := time.ParseDuration(duration)
	if err != nil {
		exitOn(fmt.Errorf("soak duration %q is not a duration (e.g. 10m): %w", duration, err))
	}
	return d + 15*time.Minute
}

// figure matches the lines worth printing: tagged figures and verdicts.
var figure = regexp.MustCompile(`SOAK-|BUDGET-|CRASH|STRANDED|after a .* gap|--- (PASS|FAIL|SKIP)|^(ok|FAIL)\s|panic:`)

func main() {
	flag.Parse()
	dir := *logDir
	if dir == "" {
		var err error
		dir, err = os.MkdirTemp("", "pubsubio-reliability-")
		exitOn(err)
	}
	exitOn(os.MkdirAll(dir, 0o755))
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		want[strings.TrimSpace(s)] = true
	}
	known := map[string]bool{}
	for _, s := range steps() {
		known[s.name] = true
	}
	for name := range want {
		if !known[name] {
			exitOn(fmt.Errorf("unknown step %q in --only; use soak, budget, crash, stranded and/or flinksoak", name))
		}
	}
	var failed []string
	for _, s := range steps() {
		if !want[s.name] {
			continue
		}
		if err := runStep(s, filepath.Join(dir, s.name+".log")); err != nil {
			fmt.Printf("%s: FAILED: %v\n", s.name, err)
			failed = append(failed, s.name)
		}
	}
	if len(failed) > 0 {
		fmt.Printf("\nfailed: %s (full output in %s)\n", strings.Join(failed, ", "), dir)
		os.Exit(1)
	}
	fmt.Printf("\nall steps passed (full output in %s)\n", dir)
}

// runStep runs one step's go test, writes its output to logPath and prints
// its figure lines as they come.
func runStep(s step, logPath string) error {
	args := []string{"test", "./integration/", "-run", s.run, "-count=1", "-v", "-timeout", s.timeout.String()}
	fmt.Printf("\n== %s: go %s (%s)\n   log: %s\n", s.name, strings.Join(args, " "), strings.Join(s.env, " "), logPath)
	f, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("creating the log: %w", err)
	}
	defer f.Close()
	cmd := exec.Command("go", args...)
	cmd.Dir = *moduleDir
	cmd.Env = append(os.Environ(), append([]string{"PUBSUB_IT_LONG=1", "PUBSUB_IT_REQUIRE=1"}, s.env...)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting go test: %w", err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			if figure.MatchString(line) {
				fmt.Println("   " + strings.TrimSpace(line))
			}
		}
		_, _ = io.Copy(f, pr) // a line past the scanner's limit: keep the rest in the log
	}()
	err = cmd.Wait()
	_ = pw.Close()
	<-scanned
	fmt.Printf("   %s took %v\n", s.name, time.Since(start).Round(time.Second))
	if err != nil {
		return fmt.Errorf("go test: %w (see %s)", err, logPath)
	}
	return nil
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
}
