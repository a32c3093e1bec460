package flink

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// envChild marks a re-executed test binary whose Java is hidden.
const envChild = "FLINK_TEST_NO_JAVA"

// TestStartSkipsOrFails re-runs TestEmbedded with no Java to be found:
// Start must skip it saying why, and fail it under PUBSUB_IT_REQUIRE=1 or
// CI=true.
func TestStartSkipsOrFails(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("already the child")
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{EnvRequire + "=", "CI="}, "--- SKIP: TestEmbedded"},
		{[]string{EnvRequire + "=1", "CI="}, "--- FAIL: TestEmbedded"},
		{[]string{EnvRequire + "=", "CI=true"}, "--- FAIL: TestEmbedded"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestEmbedded$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envChild+"=1", "PATH="+t.TempDir(), "JAVA_HOME=", EnvJava+"=")
		cmd.Env = append(cmd.Env, tc.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "no java on $PATH") {
			t.Fatalf("%v: want %q and the reason; got (exit %v):\n%s", tc.env, tc.want, err, out)
		}
	}
}

// TestClasspath resolves the classpath (once per pom; then from the cache)
// and checks that a second call does not run Maven.
func TestClasspath(t *testing.T) {
	if _, _, err := findJava(t.Context()); err != nil {
		t.Skipf("skipping: %v", err)
	}
	cp, took, err := Classpath(t.Context())
	if err != nil {
		if isUnavailable(err) && !required() {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
	t.Logf("%d classpath entries, Maven ran %v", len(strings.Split(cp, ":")), took)
	start := time.Now()
	cp2, took2, err := Classpath(t.Context())
	if err != nil || cp2 != cp || took2 != 0 {
		t.Fatalf("second Classpath: same=%v, Maven ran %v, err %v", cp2 == cp, took2, err)
	}
	t.Logf("cached classpath read in %v", time.Since(start))
}

func TestJavaMajor(t *testing.T) {
	for out, want := range map[string]int{
		`openjdk version "17.0.15" 2025-04-15`: 17,
		`java version "1.8.0_392"`:             8,
		`openjdk version "21" 2023-09-19`:      21,
	} {
		got, err := javaMajor([]byte(out))
		if err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", out, got, err, want)
		}
	}
}

// TestEmbedded starts the job server with its embedded mini cluster.
func TestEmbedded(t *testing.T) {
	f := Start(t, Options{})
	if !strings.HasPrefix(f.Endpoint, "127.0.0.1:") {
		t.Errorf("endpoint %q", f.Endpoint)
	}
	conf, err := os.ReadFile(f.ConfDir + "/flink-conf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), "execution.checkpointing.interval") {
		t.Errorf("checkpoints are on without CheckpointInterval:\n%s", conf)
	}
	if !strings.Contains(f.Log("jobserver", 64<<10), "JobService started on 127.0.0.1:") {
		t.Errorf("job server log lacks its start line:\n%s", f.Log("jobserver", 4000))
	}
}

// TestSession starts a session cluster of two TaskManagers, kills one and
// starts it again.
func TestSession(t *testing.T) {
	f := Start(t, Options{Session: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ov, err := f.REST.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ov.TaskManagers != 2 || ov.SlotsTotal != 4 {
		t.Fatalf("overview %+v, want 2 TaskManagers with 4 slots", ov)
	}
	t.Logf("Flink %s: %+v", ov.FlinkVersion, ov)
	if err := f.KillTaskManager(0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.AwaitTaskManagers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("the JobManager noticed the killed TaskManager in %v", time.Since(start).Round(time.Millisecond))
	if err := f.StartTaskManager(0); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := f.AwaitTaskManagers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("a restarted TaskManager registered in %v", time.Since(start).Round(time.Millisecond))
}

func isUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
