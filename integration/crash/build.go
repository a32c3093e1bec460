package crash

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// builds holds the binaries Build made in this test process, by package:
// the tests that run the same pipeline share one build and its link time.
var builds struct {
	sync.Mutex
	dir   string // under os.TempDir; RemoveBuilds deletes it
	byPkg map[string]*build
}

// build is one package's binary, built once.
type build struct {
	once sync.Once
	bin  string
	err  error
	out  []byte        // go build's output when it failed
	took time.Duration // how long go build took
}

// Build builds the main package pkg with `go build` the first time a test
// of this process asks for it, into a binary named name, and returns the
// binary's path; later calls return the same binary. The test process's
// TestMain deletes the binaries with RemoveBuilds.
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	builds.Lock()
	if builds.byPkg == nil {
		builds.byPkg = map[string]*build{}
	}
	b := builds.byPkg[pkg]
	if b == nil {
		b = &build{}
		builds.byPkg[pkg] = b
	}
	builds.Unlock()
	first := false
	b.once.Do(func() {
		first = true
		start := time.Now()
		b.bin, b.out, b.err = buildOnce(pkg, name)
		b.took = time.Since(start)
	})
	if b.err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, b.err, b.out)
	}
	if first {
		t.Logf("built %s in %v", pkg, b.took.Round(time.Millisecond))
	}
	return b.bin
}

// buildOnce runs go build for pkg into a directory of its own.
func buildOnce(pkg, name string) (bin string, out []byte, err error) {
	builds.Lock()
	if builds.dir == "" {
		builds.dir, err = os.MkdirTemp("", "pubsubio-it-bin-")
	}
	root := builds.dir
	builds.Unlock()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp(root, name+"-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, name)
	out, err = exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	return bin, out, err
}

// RemoveBuilds deletes the binaries Build made; TestMain calls it after
// the tests ran.
func RemoveBuilds() error {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir == "" {
		return nil
	}
	return os.RemoveAll(builds.dir)
}

// BuildPipeline builds integration/crashpipeline and returns the binary's
// path.
func BuildPipeline(t testing.TB) string {
	t.Helper()
	return Build(t, PipelinePackage, "crashpipeline")
}
