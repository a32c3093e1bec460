// Package flink gives integration tests Apache Beam's Flink runner: Beam
// Java's Flink 1.16 job server (FlinkJobServerDriver, Beam 2.56.0), run
// from jars Maven resolves, either with its embedded mini cluster or in
// front of a standalone Flink session cluster (a JobManager and separate
// TaskManager processes). A Go pipeline submits to it with
//
//	--runner=flink --endpoint=<Flink.Endpoint> --environment_type=LOOPBACK
//
// (Flink.RunnerArgs), and the test reads the JobManager's REST API
// (Flink.REST) for jobs and checkpoints.
//
//	func TestOnFlink(t *testing.T) {
//		f := flink.Start(t, flink.Options{CheckpointInterval: 2 * time.Second})
//		... run a pipeline with f.RunnerArgs() ...
//		cps, err := f.REST.Checkpoints(ctx, jobID)
//	}
//
// No job-server jar is served from Maven Central, so the classpath is
// resolved from pom.xml in this directory (embedded in the package) with
// `mvn dependency:build-classpath`, and cached in a file keyed by the
// pom's hash under the user cache directory; Maven's local repository
// keeps the jars. The first resolve downloads about 200 MB.
//
// Every process (Java 11 or newer, with the --add-opens a Beam job server
// needs on Java 17) runs on free loopback ports, in its own process group,
// its output in a log file under the test's temporary directory, and is
// stopped by SIGKILL to that group: job server, TaskManagers, JobManager.
// On Linux the kernel also kills it if the test binary dies first
// (package proc).
//
// Beam Go cannot set Beam Java's Flink pipeline options
// (checkpointingInterval, savepointPath, finishBundleBeforeCheckpointing...):
// its job submission sends its flags nested under the one option
// beam:option:go_options:v1, which Java does not read. So Flink.Endpoint is
// an OptionsProxy in front of the job server that adds them to every job
// it prepares; Options.CheckpointInterval says why checkpoints must be
// turned on that way rather than in flink-conf.yaml. The flink-conf.yaml
// this package writes (the job server's --flink-conf-dir, and every
// cluster process's --configDir) holds the loopback addresses, the
// TaskManagers' memory, and file-system checkpoint storage.
//
// Under --environment_type=LOOPBACK the submitting process is the SDK
// worker of every TaskManager; that breaks when one job's tasks run on two
// TaskManagers (see Options.SpreadTasks).
//
// Start skips the test, saying why, when Java or Maven (with no cached
// classpath) is missing; it fails instead when CI=true or
// PUBSUB_IT_REQUIRE=1.
//
// Environment variables:
//
//	PUBSUB_IT_FLINK_CLASSPATH  a ready classpath: Maven is not run
//	PUBSUB_IT_JAVA             the java binary (else $JAVA_HOME/bin/java, else $PATH)
//	PUBSUB_IT_MVN              the mvn binary (else $PATH)
//	PUBSUB_IT_FLINK_CACHE      where the classpath file is cached (else the user cache dir)
package flink
