package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	beamflink "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// inProcessJobServer is the job server Prism started in this process for
// the first in-process pipeline; every later one reuses it.
var inProcessJobServer string

// run runs p on Prism: in this process when e.jobServer is empty (what a
// local user gets), else on that standalone Prism with this process as its
// SDK worker (LOOPBACK), so this process's CPU is the worker's alone, as a
// Dataflow or Flink worker's would be; or on e.flink, when set (submitTo).
func (e *env) run(ctx context.Context, p *beam.Pipeline) error {
	if e.flink != nil {
		restore, err := submitTo(e.flink, "")
		if err != nil {
			return err
		}
		defer restore()
		_, err = beamflink.Execute(ctx, p)
		return err
	}
	*jobopts.Endpoint = e.jobServer
	if e.jobServer == "" {
		*jobopts.Endpoint = inProcessJobServer
	}
	*jobopts.EnvironmentType = "LOOPBACK"
	_, err := prism.Execute(ctx, p)
	if e.jobServer == "" {
		inProcessJobServer = *jobopts.Endpoint
	}
	return err
}

// prismProcess is a standalone Prism job server in its own process group.
type prismProcess struct {
	endpoint string
	cmd      *exec.Cmd
	dir      string
}

// startPrism builds Beam's Prism command and starts it, waiting until its
// job service answers.
func startPrism(ctx context.Context) (*prismProcess, error) {
	dir, err := os.MkdirTemp("", "bench-prism")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "prism")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/apache/beam/sdks/v2/go/cmd/prism")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("building Prism: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close() // Prism binds it next; a process taking it meanwhile fails the wait below
	cmd := exec.Command(bin, "--job_port="+strconv.Itoa(port), "--serve_http=false", "--log_kind=text", "--log_level=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting Prism: %w", err)
	}
	p := &prismProcess{endpoint: "localhost:" + strconv.Itoa(port), cmd: cmd, dir: dir}
	conn, err := grpc.NewClient(p.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.stop()
		return nil, err
	}
	defer conn.Close()
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := jobpb.NewJobServiceClient(conn).GetJobs(wait, &jobpb.GetJobsRequest{}, grpc.WaitForReady(true)); err != nil {
		p.stop()
		return nil, fmt.Errorf("prism job server at %s does not answer: %w", p.endpoint, err)
	}
	return p, nil
}

func (p *prismProcess) pid() int { return p.cmd.Process.Pid }

func (p *prismProcess) stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
	os.RemoveAll(p.dir)
}
