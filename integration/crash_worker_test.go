package integration

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
)

// Crash, worker only: Prism runs as a standalone job server (cmd/prism,
// built from the Beam module and started by the test), crashpipeline is
// submitted with the universal runner in LOOPBACK mode, so the submitting
// process is the SDK worker. The test SIGKILLs that process, not the
// runner, records what Prism does with the job, resubmits, and checks that
// nothing was lost. A second test measures what Prism does with one failed
// bundle.

const (
	prismStartLimit = time.Minute
	// jobEndLimit bounds the wait for Prism to put a job whose worker died
	// into a terminal state; beyond it the test reports that Prism hung.
	jobEndLimit = 2 * time.Minute
)

// prismServer is a standalone Prism job server run by the test.
type prismServer struct {
	proc     *crash.Process
	Endpoint string // job management service, localhost:PORT
	jobs     jobpb.JobServiceClient
}

// startPrism builds cmd/prism and starts it on a free port without its web
// UI; it and the workers it started are SIGKILLed by its process group's
// ID when the test ends.
func startPrism(t *testing.T) *prismServer {
	t.Helper()
	bin := crash.Build(t, "github.com/apache/beam/sdks/v2/go/cmd/prism", "prism")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	_ = lis.Close() // Prism binds it next; another process taking it in between fails the start below loudly
	s := &prismServer{Endpoint: "localhost:" + strconv.Itoa(port)}
	s.proc = crash.StartGroup(t, bin, "prism", "--job_port="+strconv.Itoa(port), "--serve_http=false", "--log_kind=text")
	conn, err := grpc.NewClient(s.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s.jobs = jobpb.NewJobServiceClient(conn)
	if err := s.proc.AwaitStderrLine("Serving JobManagement", prismStartLimit); err != nil {
		t.Fatalf("prism: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), prismStartLimit)
	defer cancel()
	if _, err := s.jobs.GetJobs(ctx, &jobpb.GetJobsRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("prism job server at %s does not answer: %v; stderr:\n%s", s.Endpoint, err, crash.Tail(s.proc.Stderr(), 4000))
	}
	return s
}

// runnerArgs are the flags that submit to this Prism with the submitting
// process as the SDK worker.
func (s *prismServer) runnerArgs() []string {
	return []string{"--runner=universal", "--endpoint=" + s.Endpoint, "--environment_type=LOOPBACK"}
}

// awaitRunningJob waits until Prism lists a job in state RUNNING that is
// not in known, and returns its id.
func (s *prismServer) awaitRunningJob(t *testing.T, known map[string]bool, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := s.jobs.GetJobs(ctx, &jobpb.GetJobsRequest{})
		cancel()
		if err != nil {
			t.Fatalf("prism GetJobs: %v", err)
		}
		last = last[:0]
		for _, j := range resp.GetJobInfo() {
			last = append(last, j.GetJobId()+"="+j.GetState().String())
			if !known[j.GetJobId()] && j.GetState() == jobpb.JobState_RUNNING {
				return j.GetJobId()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new RUNNING job on prism within %v; jobs: %v", timeout, last)
		}
		<-tick.C
	}
}

// awaitTerminal follows the job's state stream until a terminal state or
// timeout, and returns the states seen.
func (s *prismServer) awaitTerminal(job string, timeout time.Duration) (states []jobpb.JobState_Enum, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stream, err := s.jobs.GetStateStream(ctx, &jobpb.GetJobStateRequest{JobId: job})
	if err != nil {
		return nil, fmt.Errorf("prism GetStateStream(%s): %w", job, err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return states, fmt.Errorf("job %s reached no terminal state within %v (states seen %v): %w", job, timeout, states, err)
		}
		states = append(states, ev.GetState())
		switch ev.GetState() {
		case jobpb.JobState_DONE, jobpb.JobState_FAILED, jobpb.JobState_CANCELLED, jobpb.JobState_DRAINED, jobpb.JobState_UPDATED:
			return states, nil
		}
	}
}

// lostDisconnect reports whether Prism logged a worker's disconnect as an
// additional response of a bundle that had already answered: one form of
// the race that leaves the job RUNNING without a worker.
func (s *prismServer) lostDisconnect() bool {
	for _, line := range strings.Split(s.proc.Stderr(), "\n") {
		if strings.Contains(line, "additional bundle response") && strings.Contains(line, "SDK worker disconnected") {
			return true
		}
	}
	return false
}

// jobFailure returns Prism's "job failed" log line for job, cut to n bytes.
func (s *prismServer) jobFailure(job string, n int) string {
	for _, line := range strings.Split(s.proc.Stderr(), "\n") {
		if strings.Contains(line, "job failed") && strings.Contains(line, "job.key="+job) {
			return line[:min(n, len(line))]
		}
	}
	return "(no 'job failed' line in prism's log)"
}

func (s *prismServer) knownJobs(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.jobs.GetJobs(ctx, &jobpb.GetJobsRequest{})
	if err != nil {
		t.Fatalf("prism GetJobs: %v", err)
	}
	known := map[string]bool{}
	for _, j := range resp.GetJobInfo() {
		known[j.GetJobId()] = true
	}
	return known
}

// The SDK worker is SIGKILLed mid-stream while Prism keeps running: Prism
// puts the job into a terminal state (measured: FAILED, "SDK worker
// disconnected"), stays up, and takes the resubmitted job, which delivers
// every message. Prism 2.77 sometimes leaves the job RUNNING without a
// worker instead (seen twice in CI); the test logs that, cancels the job
// and goes on to the resubmission, which is the connector's part.
func TestCrashWorkerKilledPrismKept(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	n := crash.EnvInt(t, crash.EnvMessages, crash.DefaultMessages)
	kills := max(1, crash.EnvInt(t, crash.EnvWorkerKills, 1))
	r, seed := crash.Rand(t)
	bin := crash.BuildPipeline(t)
	prism := startPrism(t)
	c := crash.NewTopology(t, e, "crash-worker", n, nil)

	start := time.Now()
	for k := 0; k < kills; k++ {
		known := prism.knownJobs(t)
		before := c.Out.Distinct()
		target := before + 1 + r.Intn(max(1, (n-before)/(kills-k+1)))
		w := crash.Start(t, bin, fmt.Sprintf("worker-%d", k+1), append(prism.runnerArgs(), c.Args()...)...)
		job := prism.awaitRunningJob(t, known, prismStartLimit)
		got := c.Out.AwaitDistinct(target, crash.ProgressLimit)
		if !w.Running() {
			t.Fatalf("worker %d exited before its kill: %v; stderr tail:\n%s", k+1, w.Err(), crash.Tail(w.Stderr(), 4000))
		}
		w.Kill()
		killed := time.Now()
		states, err := prism.awaitTerminal(job, jobEndLimit)
		if err != nil && prism.proc.Running() && len(states) > 0 && states[len(states)-1] == jobpb.JobState_RUNNING {
			// Prism's hang, not the connector's; seen twice in CI. Once
			// (seed 1796056754418108051, a kill at the first outputs) Prism
			// took the disconnect as an "additional bundle response" of a
			// bundle that had already answered; once (seed
			// 1796067936813694276) it logged nothing at all. The job is
			// cancelled so the resubmission can run.
			t.Logf("kill %d/%d: Prism left job %s %v for %v after its worker was killed (disconnect logged as an additional bundle response: %t); cancelling it", k+1, kills, job, states, jobEndLimit, prism.lostDisconnect())
			if _, cerr := prism.jobs.Cancel(context.Background(), &jobpb.CancelJobRequest{JobId: job}); cerr != nil {
				t.Fatalf("cancelling the hung job %s: %v", job, cerr)
			}
			if _, err := prism.awaitTerminal(job, prismStartLimit); err != nil {
				t.Fatalf("the hung job %s did not end after Cancel: %v", job, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("after SIGKILL of its worker: %v; prism log tail:\n%s", err, crash.Tail(prism.proc.Stderr(), 4000))
		}
		t.Logf("kill %d/%d: worker SIGKILLed with %d of %d input IDs on the output (target %d); prism job %s went %v %v after the kill; %s",
			k+1, kills, got, n, target, job, states, time.Since(killed).Round(time.Millisecond), prism.jobFailure(job, 300))
		if last := states[len(states)-1]; last != jobpb.JobState_FAILED {
			t.Errorf("job %s ended %v after its worker was killed; measured before: FAILED", job, last)
		}
		if !prism.proc.Running() {
			t.Fatalf("prism exited after the worker was killed: %v", prism.proc.Err())
		}
	}
	runs := c.Complete(t, bin, prism.runnerArgs()...)
	c.Verify(t, "worker-killed-prism-kept", seed, kills, runs, time.Since(start))
}

// One failed bundle (the transform returns an error for the first message
// the worker sees): Prism does not retry the bundle, it fails the job; the
// failed bundle's messages are given back, and a resubmission delivers
// every one; through Deduplicate, every input comes out once.
func TestCrashFailedBundleFailsPrismJob(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	n := crash.EnvInt(t, crash.EnvMessages, crash.DefaultMessages)
	bin := crash.BuildPipeline(t)
	prism := startPrism(t)
	c := crash.NewTopology(t, e, "crash-failbundle", n, nil)
	kept := c.KeepOutput(t)

	start := time.Now()
	known := prism.knownJobs(t)
	w := crash.Start(t, bin, "fail-once", append(prism.runnerArgs(), c.Args("--fail_once", "--idle_timeout="+crash.IdleTimeout.String())...)...)
	job := prism.awaitRunningJob(t, known, prismStartLimit)
	states, err := prism.awaitTerminal(job, jobEndLimit)
	if err != nil {
		t.Fatalf("after one failed bundle: %v; prism log tail:\n%s", err, crash.Tail(prism.proc.Stderr(), 4000))
	}
	werr := w.Wait(crash.RunLimit)
	t.Logf("one failed bundle: prism job %s went %v in %v; the submitting process returned %v; %s",
		job, states, time.Since(start).Round(time.Millisecond), excerpt(werr, ""), prism.jobFailure(job, 300))
	if last := states[len(states)-1]; last != jobpb.JobState_FAILED {
		t.Errorf("job %s ended %v after one failed bundle; want FAILED (a retried bundle would have succeeded: the transform fails once)", job, last)
	}
	if werr == nil || !strings.Contains(werr.Error(), "on purpose (message 1 of this process)") {
		t.Errorf("the submitting process returned %v; want the job's failure naming the deliberate error", excerpt(werr, ""))
	}
	if got := c.Out.Distinct(); got == n {
		t.Logf("note: all %d messages were published before the job failed", n)
	}
	runs := c.Complete(t, bin, prism.runnerArgs()...)
	c.Verify(t, "failed-bundle", 0, 0, runs, time.Since(start))
	c.RepublishOutputs(t, republished)
	verifyDeduplicated(t, e, kept, c.InputIDs(), republished)
}
