package flink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pubsubio/beam-pubsubio/integration/localport"
	"github.com/pubsubio/beam-pubsubio/integration/proc"
)

// The Java entry points, all on the one classpath.
const (
	jobServerMain    = "org.apache.beam.runners.flink.FlinkJobServerDriver"
	jobManagerMain   = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
	taskManagerMain  = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
	jobServerHeap    = "-Xmx1g" // the embedded mini cluster runs the job's tasks in it
	jobManagerHeap   = "-Xmx512m"
	logDateTimeFlags = "-Dorg.slf4j.simpleLogger.showDateTime=true"
	logDateFormat    = "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"
	// At DEBUG, Beam's ProcessManager logs the command of every SDK worker
	// it starts (--environment_type=PROCESS) and lets the worker inherit
	// the JVM's stdout and stderr, so the boot program's and the worker's
	// own output land in the TaskManager's log instead of /dev/null.
	logWorkerProcesses = "-Dorg.slf4j.simpleLogger.log.org.apache.beam.runners.fnexecution.environment.ProcessManager=debug"
)

// openedPackages are the java.base packages a Beam 2.56 job server and
// Flink 1.16 reflect into; Java 17 refuses that without --add-opens.
var openedPackages = []string{
	"java.lang", "java.util", "java.lang.reflect", "java.io", "java.nio", "sun.nio.ch", "java.net",
	"java.util.concurrent", "java.util.concurrent.atomic", "java.text", "java.time", "java.math",
}

// javaFlags are the module flags every JVM here gets; the cluster's
// processes also need two exports.
func javaFlags(cluster bool) []string {
	var flags []string
	for _, p := range openedPackages {
		flags = append(flags, "--add-opens=java.base/"+p+"=ALL-UNNAMED")
	}
	flags = append(flags, "--add-opens=java.sql/java.sql=ALL-UNNAMED")
	if cluster {
		flags = append(flags, "--add-exports=java.base/sun.net.util=ALL-UNNAMED", "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED")
	}
	return flags
}

// Timings say how long the pieces of a start took.
type Timings struct {
	Maven     time.Duration // the classpath resolve, 0 when cached
	Cluster   time.Duration // session cluster: start until every TaskManager registered
	JobServer time.Duration // job server: start until its job service answered
}

func (t Timings) String() string {
	s := fmt.Sprintf("job server ready in %v", t.JobServer.Round(time.Millisecond))
	if t.Cluster > 0 {
		s = fmt.Sprintf("session cluster ready in %v, %s", t.Cluster.Round(time.Millisecond), s)
	}
	if t.Maven > 0 {
		s = fmt.Sprintf("classpath resolved by Maven in %v, %s", t.Maven.Round(time.Millisecond), s)
	}
	return s
}

// Flink is a running Flink job server, with its session cluster if
// Options.Session.
type Flink struct {
	// Endpoint is the job service, host:port, for Beam's --endpoint: a
	// proxy that adds the pipeline options Beam Go cannot send (see
	// Options.CheckpointInterval and OptionsProxy).
	Endpoint string
	// JobServerEndpoint is the job server's own job service.
	JobServerEndpoint string
	// REST is the JobManager's REST API: the session cluster's, or the mini
	// cluster's of the job that runs (that one exists only while a job
	// runs, and one job at a time can bind it).
	REST *REST
	// Dir holds everything: conf/, checkpoints/, savepoints/, logs/,
	// tmp/, artifacts/.
	Dir string
	// ConfDir holds the flink-conf.yaml every process reads.
	ConfDir string
	// CheckpointDir is where checkpoints go, one directory per job ID
	// holding chk-N directories.
	CheckpointDir string
	// Timings of the start.
	Timings Timings

	opts  Options
	java  string
	cp    string
	ports ports

	mu           sync.Mutex
	stopped      bool
	proxy        *OptionsProxy
	jobServer    *proc.Process
	jobManager   *proc.Process
	taskManagers []*proc.Process
	started      time.Time
	workers      []string // the worker binaries of PROCESS jobs (ProcessRunnerArgs)
}

// Start starts a Flink for the test in a temporary directory and stops it
// when the test ends. It skips the test when this machine lacks Java or
// Maven, and fails it instead when CI=true or PUBSUB_IT_REQUIRE=1; under
// -short it skips the test.
func Start(t testing.TB, opts Options) *Flink {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping under -short: the test starts Flink")
	}
	opts = opts.withDefaults()
	if opts.JVMFlags == nil {
		opts.JVMFlags = TestJVMFlags()
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout+time.Duration(opts.TaskManagers+2)*opts.StartTimeout)
	defer cancel()
	f, err := Launch(ctx, t.TempDir(), opts)
	switch {
	case err == nil:
	case errors.Is(err, ErrUnavailable) && !required():
		t.Skipf("skipping: %v", err)
	default:
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("flink: the job server's log, its tail:\n%s", f.Log("jobserver", 8<<10))
		}
		if err := f.Stop(); err != nil {
			t.Errorf("flink: stop: %v", err)
		}
	})
	kind := "embedded mini cluster"
	if opts.Session {
		kind = fmt.Sprintf("session cluster, %d TaskManagers", opts.TaskManagers)
	}
	t.Logf("flink: job server at %s via %s (%s, REST %s, java %s, options %v): %v",
		f.JobServerEndpoint, f.Endpoint, kind, f.REST.Addr, f.java, f.PipelineOptions(), f.Timings)
	return f
}

// required reports whether a missing Java or Maven must fail the tests.
func required() bool {
	return truthy(os.Getenv("CI")) || truthy(os.Getenv(EnvRequire))
}

func truthy(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "y", "yes":
		return true
	}
	return false
}

// Launch starts a Flink rooted at dir (which must exist or be creatable),
// bounded by ctx. The caller must Stop it. Errors that mean this machine
// cannot run it wrap ErrUnavailable.
func Launch(ctx context.Context, dir string, opts Options) (*Flink, error) {
	opts = opts.withDefaults()
	java, _, err := findJava(ctx)
	if err != nil {
		return nil, err
	}
	cp, took, err := Classpath(ctx)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		f, err := launch(ctx, dir, opts, java, cp)
		if err == nil {
			f.Timings.Maven = took
			return f, nil
		}
		lastErr = err
		if !errors.Is(err, proc.ErrPortTaken) {
			break
		}
	}
	return nil, lastErr
}

func launch(ctx context.Context, dir string, opts Options, java, cp string) (*Flink, error) {
	p, err := freePorts(opts.Session)
	if err != nil {
		return nil, err
	}
	f := &Flink{
		JobServerEndpoint: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.job)),
		REST:              NewREST(net.JoinHostPort("127.0.0.1", strconv.Itoa(p.rest))),
		Dir:               dir,
		started:           time.Now(),
		ConfDir:           filepath.Join(dir, "conf"),
		CheckpointDir:     filepath.Join(dir, "checkpoints"),
		opts:              opts,
		java:              java,
		cp:                cp,
		ports:             p,
	}
	for _, sub := range []string{"logs", "tmp", "checkpoints", "savepoints", "artifacts"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("flink: %w", err)
		}
	}
	if err := writeConf(f.ConfDir, confEntries(opts, dir, p)); err != nil {
		return nil, err
	}
	if opts.Session {
		start := time.Now()
		if err := f.startCluster(ctx); err != nil {
			return nil, errors.Join(err, f.Stop())
		}
		f.Timings.Cluster = time.Since(start)
	}
	if err := f.StartJobServer(ctx); err != nil {
		return nil, errors.Join(err, f.Stop())
	}
	proxy, err := StartOptionsProxy(f.JobServerEndpoint, JobOptions(opts))
	if err != nil {
		return nil, errors.Join(err, f.Stop())
	}
	f.proxy = proxy
	f.Endpoint = proxy.Endpoint
	return f, nil
}

// freePorts reserves distinct loopback ports that StartJobServer can bind
// again after KillJobServer (localport.Reserve).
func freePorts(session bool) (ports, error) {
	n := 4
	if session {
		n = 5
	}
	got, err := localport.Reserve(n)
	if err != nil {
		return ports{}, fmt.Errorf("flink: %w", err)
	}
	p := ports{job: got[0], artifact: got[1], expansion: got[2], rest: got[3]}
	if session {
		p.rpc = got[4]
	}
	return p, nil
}

// RunnerArgs are the flags that submit a Beam Go pipeline to this Flink
// with the submitting process as its SDK worker.
func (f *Flink) RunnerArgs() []string {
	return append([]string{"--runner=flink", "--endpoint=" + f.Endpoint, "--environment_type=LOOPBACK"}, f.commitArgs()...)
}

// UserArgs are the flags a user passes to submit a Beam Go pipeline to
// their own job server: no proxy in front of it, and the REST address
// pubsubio's reads need to ack at checkpoints, which they turn on
// themselves (--pubsubio_flink_checkpointing). The SDK workers are env's
// (ProcessEnvironmentArgs), or else the submitting process (LOOPBACK).
func (f *Flink) UserArgs(env ...string) []string {
	if len(env) == 0 {
		env = []string{"--environment_type=LOOPBACK"}
	}
	return append([]string{"--runner=flink", "--endpoint=" + f.JobServerEndpoint, "--pubsubio_flink_rest=" + f.REST.Addr}, env...)
}

// jobs numbers the jobs submitted with RunnerArgs, for unique job names.
var jobs atomic.Int64

// commitArgs say when pubsubio's reads ack: once a completed checkpoint
// covers their output (found by the job's name on the REST API) when this
// Flink checkpoints; otherwise, with nothing ever durable, at the split's
// next bundle.
func (f *Flink) commitArgs() []string {
	if f.opts.CheckpointInterval <= 0 {
		return []string{"--pubsubio_commit=RESUME"}
	}
	return []string{"--pubsubio_flink_rest=" + f.REST.Addr, fmt.Sprintf("--job_name=pubsubio-it-%d-%d", os.Getpid(), jobs.Add(1))}
}

// Options returns the options this Flink was started with.
func (f *Flink) Options() Options { return f.opts }

func (f *Flink) logPath(name string) string { return filepath.Join(f.Dir, "logs", name+".log") }

func (f *Flink) startJava(name, main string, cluster bool, extra []string, args ...string) (*proc.Process, error) {
	argv := append([]string{}, javaFlags(cluster)...)
	argv = append(argv, extra...)
	argv = append(argv, f.opts.JVMFlags...)
	argv = append(argv, "-Djava.io.tmpdir="+filepath.Join(f.Dir, "tmp"), logDateTimeFlags, logDateFormat, logWorkerProcesses, "-cp", f.cp, main)
	argv = append(argv, args...)
	env := append(os.Environ(), "FLINK_CONF_DIR="+f.ConfDir)
	p, err := proc.Start(name, f.java, argv, f.Dir, f.logPath(name), env)
	if errors.Is(err, proc.ErrNoUnix) {
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return p, err
}

// StartJobServer starts the job server (again, on the same ports, after
// KillJobServer), rereading flink-conf.yaml, and waits until its job
// service answers.
func (f *Flink) StartJobServer(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.jobServer != nil && f.jobServer.Running() {
		return fmt.Errorf("flink: the job server (pid %d) is running", f.jobServer.PID)
	}
	master := "[local]"
	heap := jobServerHeap
	if f.opts.Session {
		master = net.JoinHostPort("127.0.0.1", strconv.Itoa(f.ports.rest))
		heap = jobManagerHeap
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.StartTimeout)
	defer cancel()
	start := time.Now()
	p, err := f.startJava("jobserver", jobServerMain, false, []string{heap},
		"--flink-master="+master,
		"--job-host=127.0.0.1",
		"--job-port="+strconv.Itoa(f.ports.job),
		"--artifact-port="+strconv.Itoa(f.ports.artifact),
		"--expansion-port="+strconv.Itoa(f.ports.expansion),
		"--flink-conf-dir="+f.ConfDir,
		"--artifacts-dir="+filepath.Join(f.Dir, "artifacts"),
	)
	if err != nil {
		return err
	}
	f.jobServer = p
	if err := waitJobService(ctx, f.JobServerEndpoint, p); err != nil {
		out := p.Output(8 << 10)
		err = errors.Join(err, p.Kill())
		if proc.PortTaken(out) {
			err = fmt.Errorf("%w: %w", proc.ErrPortTaken, err)
		}
		return fmt.Errorf("flink: job server (pid %d): %w\n--- job server log tail ---\n%s--- end ---", p.PID, err, out)
	}
	f.Timings.JobServer = time.Since(start)
	return nil
}

// KillJobServer SIGKILLs the job server (and any SDK worker it started),
// as a crash would. With the embedded mini cluster the running job dies
// with it.
func (f *Flink) KillJobServer() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.jobServer == nil {
		return nil
	}
	return f.jobServer.Kill()
}

// RetainedCheckpoint returns the directory and ID of the last checkpoint
// the job jobID left on disk (chk-N holding _metadata). It asks the file
// system, not the REST API: the REST API's statistics lag by seconds, and
// by then Flink may have completed another checkpoint and deleted the one
// it reported.
func (f *Flink) RetainedCheckpoint(jobID string) (string, int64, error) {
	dirs, err := filepath.Glob(filepath.Join(f.CheckpointDir, jobID, "chk-*", "_metadata"))
	if err != nil {
		return "", 0, err
	}
	path, last := "", int64(-1)
	for _, meta := range dirs {
		dir := filepath.Dir(meta)
		id, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(dir), "chk-"), 10, 64)
		if err == nil && id > last {
			path, last = dir, id
		}
	}
	if path == "" {
		return "", 0, fmt.Errorf("flink: job %s retained no checkpoint under %s", jobID, f.CheckpointDir)
	}
	return path, last, nil
}

// SetRestore makes jobs start from path (a chk-N or savepoint directory;
// "" for none): the proxy adds savepointPath to jobs prepared from now on,
// and flink-conf.yaml gets execution.savepoint.path, which the embedded
// mini cluster reads when the job server starts (StartJobServer after
// KillJobServer).
func (f *Flink) SetRestore(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opts.Restore = path
	if err := writeConf(f.ConfDir, confEntries(f.opts, f.Dir, f.ports)); err != nil {
		return err
	}
	return f.proxy.SetOptions(JobOptions(f.opts))
}

// ProcessGroups are the process groups of this Flink's JVMs (job server,
// JobManager, TaskManagers), each a JVM and what it started: the SDK
// workers of a PROCESS environment are in their TaskManager's group.
func (f *Flink) ProcessGroups() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var groups []int
	for _, p := range f.processes() {
		groups = append(groups, p.PID)
	}
	return groups
}

// processes are the JVMs started, in the order Stop kills them: the job
// server, the TaskManagers, the JobManager. Call it with f.mu held.
func (f *Flink) processes() []*proc.Process {
	var procs []*proc.Process
	for _, p := range append(append([]*proc.Process{f.jobServer}, f.taskManagers...), f.jobManager) {
		if p != nil {
			procs = append(procs, p)
		}
	}
	return procs
}

// PipelineOptions returns the Beam Java pipeline options the proxy adds to
// every job.
func (f *Flink) PipelineOptions() map[string]any { return f.proxy.Options() }

// startCluster starts the JobManager and TaskManagers and waits until
// every TaskManager has registered.
func (f *Flink) startCluster(ctx context.Context) error {
	f.mu.Lock()
	jm, err := f.startJava("jobmanager", jobManagerMain, true, []string{jobManagerHeap}, "--configDir", f.ConfDir)
	if err == nil {
		f.jobManager = jm
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	for i := range f.opts.TaskManagers {
		if err := f.StartTaskManager(i); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.StartTimeout)
	defer cancel()
	return f.awaitTaskManagers(ctx, f.opts.TaskManagers)
}

// StartTaskManager starts TaskManager i of the session cluster (again,
// after KillTaskManager(i)). It does not wait for it to register; see
// AwaitTaskManagers.
func (f *Flink) StartTaskManager(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.opts.Session {
		return errors.New("flink: no session cluster (Options.Session)")
	}
	for len(f.taskManagers) <= i {
		f.taskManagers = append(f.taskManagers, nil)
	}
	if tm := f.taskManagers[i]; tm != nil && tm.Running() {
		return fmt.Errorf("flink: TaskManager %d (pid %d) is running", i, tm.PID)
	}
	name := "taskmanager-" + strconv.Itoa(i)
	tm, err := f.startJava(name, taskManagerMain, true, taskManagerJVM,
		"--configDir", f.ConfDir, "-D", "taskmanager.resource-id="+name)
	if err != nil {
		return err
	}
	f.taskManagers[i] = tm
	return nil
}

// KillTaskManager SIGKILLs TaskManager i and the SDK workers it started.
func (f *Flink) KillTaskManager(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i < 0 || i >= len(f.taskManagers) || f.taskManagers[i] == nil {
		return fmt.Errorf("flink: no TaskManager %d", i)
	}
	return f.taskManagers[i].Kill()
}

// AwaitTaskManagers waits until the session cluster's JobManager counts n
// registered TaskManagers.
func (f *Flink) AwaitTaskManagers(ctx context.Context, n int) error {
	return f.awaitTaskManagers(ctx, n)
}

func (f *Flink) awaitTaskManagers(ctx context.Context, n int) error {
	var last string
	for {
		f.mu.Lock()
		jm := f.jobManager
		f.mu.Unlock()
		if jm == nil || !jm.Running() {
			out := ""
			if jm != nil {
				out = jm.Output(8 << 10)
			}
			if proc.PortTaken(out) {
				return fmt.Errorf("%w: the JobManager exited", proc.ErrPortTaken)
			}
			return fmt.Errorf("flink: the JobManager is not running\n--- jobmanager log tail ---\n%s--- end ---", out)
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ov, err := f.REST.Overview(actx)
		cancel()
		if err == nil && ov.TaskManagers == n {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d TaskManagers registered", ov.TaskManagers)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flink: %d TaskManagers not registered at %s in time (last: %s)\n--- jobmanager log tail ---\n%s--- end ---\n%s",
				n, f.REST.Addr, last, jm.Output(6<<10), f.taskManagerTails(3<<10))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (f *Flink) taskManagerTails(max int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for i, tm := range f.taskManagers {
		if tm != nil {
			fmt.Fprintf(&b, "--- taskmanager-%d log tail ---\n%s--- end ---\n", i, tm.Output(max))
		}
	}
	return b.String()
}

// Log returns the tail (at most max bytes) of a process's log: "jobserver",
// "jobmanager" or "taskmanager-N".
func (f *Flink) Log(name string, max int) string { return proc.ReadTail(f.logPath(name), 0, max) }

// LogPath returns the path of a process's log (see Log).
func (f *Flink) LogPath(name string) string { return f.logPath(name) }

// Stop kills the job server, the TaskManagers and the JobManager, in that
// order, each by its process group. It is idempotent.
func (f *Flink) Stop() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return nil
	}
	f.stopped = true
	if f.proxy != nil {
		f.proxy.Stop()
	}
	var errs []error
	for _, p := range f.processes() {
		if err := p.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, w := range f.workers {
		_, err := proc.RemoveBootCopies(w, f.started)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// waitJobService polls the job service's GetJobs until it answers, ctx
// ends, or the process exits or cannot bind.
func waitJobService(ctx context.Context, endpoint string, p *proc.Process) error {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := jobpb.NewJobServiceClient(conn)
	start := time.Now()
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := client.GetJobs(actx, &jobpb.GetJobsRequest{})
		cancel()
		if err == nil {
			return nil
		}
		if proc.PortTaken(p.Output(64 << 10)) {
			return fmt.Errorf("%w (GetJobs: %v)", proc.ErrPortTaken, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job service at %s not ready after %v (%d GetJobs attempts), last error: %w",
				endpoint, time.Since(start).Round(time.Millisecond), attempt, err)
		case <-p.Exited():
			return fmt.Errorf("exited (%v) before its job service at %s answered", p.Err(), endpoint)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
