package flink

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure a Flink for a test. The zero value is the job server's
// embedded mini cluster, parallelism 2, checkpoints off.
type Options struct {
	// Session runs a standalone session cluster (a JobManager and
	// TaskManagers, separate JVMs) and points the job server at it;
	// otherwise each job runs in a mini cluster inside the job server.
	Session bool
	// TaskManagers is the number of TaskManagers of a session cluster
	// (default 2), each with SlotsPerTaskManager slots (default 2).
	TaskManagers        int
	SlotsPerTaskManager int
	// SpreadTasks spreads a job's tasks over the TaskManagers
	// (cluster.evenly-spread-out-slots); otherwise Flink fills one
	// TaskManager's slots first, and a job of parallelism 2 runs on one.
	// Spread tasks need SDK workers per TaskManager
	// (--environment_type=PROCESS): under LOOPBACK every TaskManager asks
	// the submitting process for workers named by a per-JVM counter, "1-1"
	// from each, and Beam Go's loopback pool refuses the second ("worker
	// with ID "1-1" already exists"), failing the task.
	SpreadTasks bool
	// Parallelism is parallelism.default (default 2). Beam Go's
	// --parallelism flag, when set, wins.
	Parallelism int
	// CheckpointInterval, when positive, turns Flink checkpointing on the
	// way Beam's Flink runner expects: as the pipeline options
	// checkpointingInterval and finishBundleBeforeCheckpointing, which the
	// job service proxy (Flink.Endpoint) adds to every job. Checkpoints go
	// to a FileSystemCheckpointStorage under Flink.CheckpointDir (the
	// flink-conf.yaml's state.checkpoints.dir, which the job's environment
	// turns into its own storage, overriding state.checkpoint-storage),
	// with the hashmap state backend.
	//
	// Only the pipeline option keeps Beam's Impulse sources running
	// (shutdownSourcesAfterIdleMs = Long.MAX_VALUE); with checkpoints
	// turned on in flink-conf.yaml instead (Conf
	// "execution.checkpointing.interval") the sources finish at once, every
	// downstream stage runs ExecutableStageDoFnOperator.flushData, which
	// fires a splittable DoFn's resume timers in a busy loop whatever their
	// delay, and no checkpoint completes while the DoFn runs.
	// finishBundleBeforeCheckpointing is needed because otherwise a
	// checkpoint taken while the first stage's bundle is open holds that
	// bundle's output until the next element or watermark, which a stage
	// fed by one Impulse never gets: the job stalls.
	//
	// A job with checkpoints on never finishes by itself (its sources wait
	// for ever), unless a bounded pubsubio read drains it
	// (flinkjob.Drain): cancel it (REST.Cancel) once its output is checked;
	// the submitting process then reports a JobCancellationException.
	CheckpointInterval time.Duration
	// RetainCheckpoints keeps the last completed checkpoint when the job is
	// cancelled or the job server dies, so that a new job can start from it
	// (Restore).
	RetainCheckpoints bool
	// Restore is a checkpoint or savepoint path (a chk-N directory) a job
	// submitted to this Flink starts from: flink-conf.yaml's
	// execution.savepoint.path (which the embedded mini cluster applies)
	// and the pipeline option savepointPath (which Beam applies to a
	// session cluster).
	Restore string
	// PipelineOptions are more Beam Java pipeline options the proxy adds to
	// every job, by their Java names (FlinkPipelineOptions:
	// "maxBundleSize", "shutdownSourcesAfterIdleMs"...); they override
	// those the fields above set.
	PipelineOptions map[string]any
	// Conf holds more flink-conf.yaml entries; they override the ones this
	// package writes.
	Conf map[string]string
	// StartTimeout bounds the start of every process (default 3 minutes,
	// for a loaded 2-core machine; a job server is ready in about 12 s).
	StartTimeout time.Duration
	// JVMFlags are more flags for every JVM of this Flink. If nil, Start
	// uses TestJVMFlags and Launch adds none, so that flinkup and the
	// benchmarks run at full speed.
	JVMFlags []string
}

// TestJVMFlags returns the flags that trade a JVM's peak speed for less
// CPU: only the client compiler, and the serial collector. The suite runs
// a dozen JVMs at once on 2 cores, where the optimizing compiler's and the
// parallel collector's threads compete with the tests themselves.
func TestJVMFlags() []string { return []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"} }

func (o Options) withDefaults() Options {
	if o.TaskManagers <= 0 {
		o.TaskManagers = 2
	}
	if o.SlotsPerTaskManager <= 0 {
		o.SlotsPerTaskManager = 2
	}
	if o.Parallelism <= 0 {
		o.Parallelism = 2
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 3 * time.Minute
	}
	return o
}

// ports are the fixed loopback ports of one Flink; the rest are chosen by
// the kernel (blob server, TaskManager RPC and data ports).
type ports struct {
	job, artifact, expansion int // job server
	rest                     int // JobManager REST (the mini cluster's, or the session cluster's)
	rpc                      int // session JobManager RPC
}

// confEntries is the flink-conf.yaml of a Flink rooted at dir.
func confEntries(o Options, dir string, p ports) map[string]string {
	c := map[string]string{
		"rest.address":      "127.0.0.1",
		"rest.bind-address": "127.0.0.1",
		"rest.port":         strconv.Itoa(p.rest),
		// The per-job mini cluster binds rest.bind-port, or a random port
		// when it is unset.
		"rest.bind-port":         strconv.Itoa(p.rest),
		"jobmanager.rpc.address": "127.0.0.1",
		"jobmanager.bind-host":   "127.0.0.1",
		"taskmanager.host":       "127.0.0.1",
		"taskmanager.bind-host":  "127.0.0.1",
		"parallelism.default":    strconv.Itoa(o.Parallelism),
		"io.tmp.dirs":            filepath.Join(dir, "tmp"),

		// State and checkpoints: file system storage under dir.
		"state.backend":            "hashmap",
		"state.checkpoint-storage": "filesystem",
		"state.checkpoints.dir":    "file://" + filepath.Join(dir, "checkpoints"),
		"state.savepoints.dir":     "file://" + filepath.Join(dir, "savepoints"),

		// A job's mini cluster keeps its REST port until the result of
		// every stop-with-savepoint was read, or for this long (5 min by
		// default): a bounded read's drain (flinkjob.Drain) ends with the
		// job, and its LOOPBACK worker with it, often before reading it,
		// and the next job could not bind the port.
		"rest.async.store-duration": "1 s",
	}
	if o.RetainCheckpoints {
		c["execution.checkpointing.externalized-checkpoint-retention"] = "RETAIN_ON_CANCELLATION"
	}
	if o.Restore != "" {
		c["execution.savepoint.path"] = o.Restore
	}
	if o.Session {
		c["jobmanager.rpc.port"] = strconv.Itoa(p.rpc)
		c["taskmanager.numberOfTaskSlots"] = strconv.Itoa(o.SlotsPerTaskManager)
		if o.SpreadTasks {
			c["cluster.evenly-spread-out-slots"] = "true"
		}
		// A killed TaskManager is noticed within seconds, not the
		// default 50.
		c["heartbeat.interval"] = "2000"
		c["heartbeat.timeout"] = "10000"
		// The start scripts that derive these are not in the jars: every
		// component is explicit (see taskManagerJVM for the JVM flags).
		for k, v := range taskManagerMemory {
			c[k] = v
		}
	}
	for k, v := range o.Conf {
		c[k] = v
	}
	return c
}

// JobOptions are the Beam Java pipeline options the job service proxy
// adds to every job under o: checkpointing, retention, restore, and
// o.PipelineOptions.
func JobOptions(o Options) map[string]any {
	p := map[string]any{}
	if o.CheckpointInterval > 0 {
		p["checkpointingInterval"] = o.CheckpointInterval.Milliseconds()
		p["finishBundleBeforeCheckpointing"] = true
		if o.RetainCheckpoints {
			p["externalizedCheckpointsEnabled"] = true
			p["retainExternalizedCheckpointsOnCancellation"] = true
		}
	}
	if o.Restore != "" {
		p["savepointPath"] = o.Restore
	}
	for k, v := range o.PipelineOptions {
		p[k] = v
	}
	return p
}

// taskManagerMemory sets every TaskManager memory component, in MiB.
var taskManagerMemory = map[string]string{
	"taskmanager.cpu.cores":                      "1",
	"taskmanager.memory.framework.heap.size":     "128m",
	"taskmanager.memory.task.heap.size":          "384m",
	"taskmanager.memory.framework.off-heap.size": "128m",
	"taskmanager.memory.task.off-heap.size":      "256m",
	"taskmanager.memory.managed.size":            "64m",
	"taskmanager.memory.network.min":             "64m",
	"taskmanager.memory.network.max":             "64m",
	"taskmanager.memory.jvm-metaspace.size":      "256m",
	"taskmanager.memory.jvm-overhead.min":        "128m",
	"taskmanager.memory.jvm-overhead.max":        "128m",
}

// taskManagerJVM are the JVM flags Flink's start script would derive from
// taskManagerMemory: heap = framework + task heap, direct = framework +
// task off-heap + network.
var taskManagerJVM = []string{"-Xms512m", "-Xmx512m", "-XX:MaxDirectMemorySize=448m", "-XX:MaxMetaspaceSize=256m"}

func writeConf(confDir string, entries map[string]string) error {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("# Written by github.com/pubsubio/beam-pubsubio/integration/flink.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, entries[k])
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return fmt.Errorf("flink: conf dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "flink-conf.yaml"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("flink: write flink-conf.yaml: %w", err)
	}
	return nil
}
