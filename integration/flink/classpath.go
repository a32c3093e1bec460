package flink

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// pom pins the job server's artifacts; its hash keys the cached classpath.
//
//go:embed pom.xml
var pom []byte

// Environment variables understood by this package.
const (
	EnvClasspath = "PUBSUB_IT_FLINK_CLASSPATH"
	EnvJava      = "PUBSUB_IT_JAVA"
	EnvMaven     = "PUBSUB_IT_MVN"
	EnvCache     = "PUBSUB_IT_FLINK_CACHE"
	EnvRequire   = "PUBSUB_IT_REQUIRE"
)

// ErrUnavailable is wrapped by errors that mean "this machine cannot run
// Flink" (no Java, or no Maven and no cached classpath), as opposed to a
// start that failed.
var ErrUnavailable = errors.New("flink job server unavailable")

// resolveTimeout bounds one Maven run: a cold resolve downloads about
// 200 MB (100 s measured here).
const resolveTimeout = 15 * time.Minute

// PomHash is the hash of the embedded pom.xml that names the cached
// classpath file.
func PomHash() string {
	sum := sha256.Sum256(pom)
	return hex.EncodeToString(sum[:8])
}

// CacheDir is where the classpath of this pom is cached.
func CacheDir() (string, error) {
	root := os.Getenv(EnvCache)
	if root == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("flink: no cache directory (set %s): %w", EnvCache, err)
		}
		root = filepath.Join(dir, "pubsubio-flink")
	}
	return filepath.Join(root, PomHash()), nil
}

// Classpath returns the job server's classpath: $PUBSUB_IT_FLINK_CLASSPATH
// if set, else the cached file for this pom if every entry still exists,
// else what `mvn dependency:build-classpath` resolves (then cached).
// Concurrent callers, in this or other processes, resolve once. The
// returned duration is how long Maven ran (0 when it did not).
func Classpath(ctx context.Context) (string, time.Duration, error) {
	if cp := strings.TrimSpace(os.Getenv(EnvClasspath)); cp != "" {
		if err := checkClasspath(cp); err != nil {
			return "", 0, fmt.Errorf("flink: %s: %w", EnvClasspath, err)
		}
		return cp, 0, nil
	}
	dir, err := CacheDir()
	if err != nil {
		return "", 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, fmt.Errorf("flink: create classpath cache: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return "", 0, err
	}
	defer unlock()

	cpFile := filepath.Join(dir, "classpath.txt")
	if b, err := os.ReadFile(cpFile); err == nil {
		cp := strings.TrimSpace(string(b))
		if checkClasspath(cp) == nil {
			return cp, 0, nil
		}
		// Maven's local repository lost jars: resolve again.
	}
	mvn, err := findMaven()
	if err != nil {
		return "", 0, err
	}
	pomPath := filepath.Join(dir, "pom.xml")
	if err := os.WriteFile(pomPath, pom, 0o644); err != nil {
		return "", 0, fmt.Errorf("flink: write pom: %w", err)
	}
	tmp := cpFile + ".tmp"
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", pomPath, "dependency:build-classpath", "-Dmdep.outputFile="+tmp)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return "", took, fmt.Errorf("flink: %s dependency:build-classpath over %s failed after %v: %w\n%s",
			mvn, pomPath, took.Round(time.Millisecond), err, tail(string(out), 4000))
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return "", took, fmt.Errorf("flink: maven wrote no classpath: %w\n%s", err, tail(string(out), 4000))
	}
	cp := strings.TrimSpace(string(b))
	if err := checkClasspath(cp); err != nil {
		return "", took, fmt.Errorf("flink: maven's classpath: %w", err)
	}
	if err := os.Rename(tmp, cpFile); err != nil {
		return "", took, fmt.Errorf("flink: cache classpath: %w", err)
	}
	return cp, took, nil
}

// mainJars must be on any classpath given to this package.
var mainJars = []string{"beam-runners-flink-1.16-", "beam-runners-java-job-service-", "flink-runtime-"}

func checkClasspath(cp string) error {
	entries := filepath.SplitList(cp)
	for _, e := range entries {
		if _, err := os.Stat(e); err != nil {
			return fmt.Errorf("entry %s: %w", e, err)
		}
	}
	for _, want := range mainJars {
		found := false
		for _, e := range entries {
			if strings.HasPrefix(filepath.Base(e), want) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("no %s*.jar among its %d entries", want, len(entries))
		}
	}
	return nil
}

func findMaven() (string, error) {
	if p := os.Getenv(EnvMaven); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("flink: %s=%s: %w", EnvMaven, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("mvn"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: Maven (mvn) is not on $PATH and no classpath is cached for pom %s; install Maven 3, set %s, or set %s to a resolved classpath",
		ErrUnavailable, PomHash(), EnvMaven, EnvClasspath)
}

// minJava is the oldest Java this package starts: the --add-opens flags
// need 9, Flink 1.16 supports 11.
const minJava = 11

// findJava returns the java binary and its major version.
func findJava(ctx context.Context) (string, int, error) {
	var java string
	switch {
	case os.Getenv(EnvJava) != "":
		java = os.Getenv(EnvJava)
		if _, err := os.Stat(java); err != nil {
			return "", 0, fmt.Errorf("flink: %s=%s: %w", EnvJava, java, err)
		}
	case os.Getenv("JAVA_HOME") != "" && isFile(filepath.Join(os.Getenv("JAVA_HOME"), "bin", "java")):
		java = filepath.Join(os.Getenv("JAVA_HOME"), "bin", "java")
	default:
		p, err := exec.LookPath("java")
		if err != nil {
			return "", 0, fmt.Errorf("%w: no java on $PATH (and no $JAVA_HOME or %s); install Java 17", ErrUnavailable, EnvJava)
		}
		java = p
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, java, "-version").CombinedOutput()
	if err != nil {
		return "", 0, fmt.Errorf("flink: %s -version: %w\n%s", java, err, out)
	}
	major, err := javaMajor(out)
	if err != nil {
		return "", 0, fmt.Errorf("flink: %s -version: %w", java, err)
	}
	if major < minJava {
		return "", 0, fmt.Errorf("%w: %s is Java %d; the Flink job server needs Java %d or newer (17 tested)", ErrUnavailable, java, major, minJava)
	}
	return java, major, nil
}

var javaVersion = regexp.MustCompile(`version "(1\.)?(\d+)`)

func javaMajor(versionOutput []byte) (int, error) {
	m := javaVersion.FindSubmatch(versionOutput)
	if m == nil {
		return 0, fmt.Errorf("no version in %q", bytes.TrimSpace(versionOutput))
	}
	return strconv.Atoi(string(m[2]))
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// tail returns the last n bytes of s, from a line start where possible.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return "(...)\n" + s
}
