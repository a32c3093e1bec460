package crash

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// binDir is the directory under os.TempDir of this process's builds;
// RemoveBuilds deletes it.
var binDir = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "pubsubio-it-bin-") })

// builds holds the binaries Build made in this test process, by package
// (a func() *build, run once): the tests that run the same pipeline share
// one build and its link time.
var builds sync.Map

// build is one package's binary.
type build struct {
	bin    string
	err    error
	out    []byte        // go build's output when it failed
	took   time.Duration // how long go build took
	logged atomic.Bool   // a test has logged the build
}

// Build builds the main package pkg with `go build` the first time a test
// of this process asks for it, into a binary named name, and returns the
// binary's path; later calls return the same binary. The test process's
// TestMain deletes the binaries with RemoveBuilds.
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	once, _ := builds.LoadOrStore(pkg, sync.OnceValue(func() *build { return buildOnce(pkg, name) }))
	b := once.(func() *build)()
	if b.err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, b.err, b.out)
	}
	if b.logged.CompareAndSwap(false, true) {
		t.Logf("built %s in %v", pkg, b.took.Round(time.Millisecond))
	}
	return b.bin
}

// buildOnce runs go build for pkg into a directory of its own.
func buildOnce(pkg, name string) *build {
	start := time.Now()
	b := &build{}
	root, err := binDir()
	if err != nil {
		b.err = err
		return b
	}
	dir, err := os.MkdirTemp(root, name+"-")
	if err != nil {
		b.err = err
		return b
	}
	b.bin = filepath.Join(dir, name)
	b.out, b.err = exec.Command("go", "build", "-o", b.bin, pkg).CombinedOutput()
	b.took = time.Since(start)
	return b
}

// RemoveBuilds deletes the binaries Build made; TestMain calls it after
// the tests ran.
func RemoveBuilds() error {
	dir, err := binDir()
	if err != nil {
		return nil // no directory, nothing built
	}
	return os.RemoveAll(dir)
}

// BuildPipeline builds integration/crashpipeline and returns the binary's
// path.
func BuildPipeline(t testing.TB) string {
	t.Helper()
	return Build(t, PipelinePackage, "crashpipeline")
}
