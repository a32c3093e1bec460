// Flinkup starts Beam's Flink job server the way the integration tests do
// (package integration/flink) and keeps it running until interrupted, for
// trying pipelines by hand:
//
//	go run ./integration/flink/flinkup --session --checkpoint=2s
//	go run ./examples/quickstart --runner=flink --endpoint=127.0.0.1:PORT --environment_type=LOOPBACK
//
// It prints the endpoint, the REST address and the directory holding the
// configuration, logs and checkpoints, and removes that directory on exit
// unless --keep.
//
// A pipeline whose reads ack at checkpoints turns them on itself
// (--pubsubio_flink_checkpointing); --checkpoint sets them for other
// pipelines. With --job_server it starts nothing but the job service
// proxy, in front of a job server already running, for pipeline options
// of other programs: Beam Go cannot pass Flink's pipeline options itself
// (docs/upstream/go-runner-options.md).
//
//	go run ./integration/flink/flinkup --job_server=localhost:8099 --checkpoint=10s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/flink"
)

var (
	session     = flag.Bool("session", false, "start a session cluster (JobManager + TaskManagers) behind the job server")
	tms         = flag.Int("taskmanagers", 2, "TaskManagers of the session cluster")
	spread      = flag.Bool("spread", false, "spread tasks over the TaskManagers (needs --environment_type=PROCESS)")
	checkpoint  = flag.Duration("checkpoint", 0, "checkpoint interval (0: checkpoints off)")
	retain      = flag.Bool("retain", false, "retain checkpoints on cancellation")
	restore     = flag.String("restore", "", "checkpoint or savepoint path jobs start from")
	parallelism = flag.Int("parallelism", 2, "parallelism.default")
	keep        = flag.Bool("keep", false, "keep the directory on exit")
	jobServer   = flag.String("job_server", "", "host:port of a running job server: start only the proxy that adds the options to its jobs")
	pipelineOpt = optionFlags{}
)

func init() {
	flag.Var(pipelineOpt, "option", "name=value: a Beam Java pipeline option (maxBundleSize=100) added to every job by the job service proxy (repeatable)")
}

// optionFlags collects --option name=value; a value that is JSON (a number,
// true, false) is sent as such, anything else as a string.
type optionFlags map[string]any

func (o optionFlags) String() string { return fmt.Sprint(map[string]any(o)) }

func (o optionFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	var parsed any
	if err := json.Unmarshal([]byte(v), &parsed); err == nil {
		o[k] = parsed
	} else {
		o[k] = v
	}
	return nil
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flinkup:", err)
		os.Exit(1)
	}
}

func run() error {
	if *jobServer != "" {
		return proxyOnly()
	}
	dir, err := os.MkdirTemp("", "flinkup-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	f, err := flink.Launch(ctx, dir, flink.Options{
		Session:            *session,
		TaskManagers:       *tms,
		SpreadTasks:        *spread,
		Parallelism:        *parallelism,
		CheckpointInterval: *checkpoint,
		RetainCheckpoints:  *retain,
		Restore:            *restore,
		PipelineOptions:    pipelineOpt,
	})
	if err != nil {
		return err
	}
	defer f.Stop()
	fmt.Printf("job server %s; the endpoint below adds pipeline options %v\n", f.JobServerEndpoint, f.PipelineOptions())
	fmt.Printf("endpoint %s\nrest %s\ndir %s\nready in %v (%v)\n", f.Endpoint, f.REST.Addr, f.Dir, time.Since(start).Round(time.Millisecond), f.Timings)
	fmt.Printf("submit with: --runner=flink --endpoint=%s --environment_type=LOOPBACK --pubsubio_flink_rest=%s\n", f.Endpoint, f.REST.Addr)
	<-ctx.Done()
	return nil
}

// proxyOnly serves the options proxy in front of --job_server until
// interrupted.
func proxyOnly() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := flink.JobOptions(flink.Options{CheckpointInterval: *checkpoint, RetainCheckpoints: *retain, Restore: *restore, PipelineOptions: pipelineOpt})
	p, err := flink.StartOptionsProxy(*jobServer, opts)
	if err != nil {
		return err
	}
	defer p.Stop()
	fmt.Printf("endpoint %s adds pipeline options %v to the jobs of %s\n", p.Endpoint, opts, *jobServer)
	<-ctx.Done()
	return nil
}
