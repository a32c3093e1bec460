package pubsubio_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// beamPackageDir is the directory of Beam's io/pubsubio in the module
// cache, at the version this module requires.
func beamPackageDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/apache/beam/sdks/v2").Output()
	if err != nil {
		t.Fatalf("locating the Beam module: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "go", "pkg", "beam", "io", "pubsubio")
}
