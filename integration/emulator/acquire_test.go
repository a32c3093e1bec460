package emulator

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// envHideSDK, set in a re-executed test binary, hides the well-known Cloud
// SDK locations so the "nothing available" path can be exercised end to end.
const envHideSDK = "EMULATOR_TEST_HIDE_SDK"

func init() {
	if os.Getenv(envHideSDK) == "1" {
		wellKnownSDKs = nil
	}
}

// absentImage hides the container path where a Docker engine runs: an
// unreachable DOCKER_HOST alone does not, as testcontainers then falls back
// to the default socket.
const absentImage = "pubsubio/absent:none"

// TestRequireSkipsOrFails re-runs this test binary with no emulator
// available: Require must skip TestRoundTrip with the three options, or fail
// it when PUBSUB_IT_REQUIRE=1.
func TestRequireSkipsOrFails(t *testing.T) {
	if os.Getenv(envHideSDK) == "1" {
		t.Skip("already the child")
	}
	for _, tc := range []struct {
		require string
		want    string
	}{{"", "--- SKIP: TestRoundTrip"}, {"1", "--- FAIL: TestRoundTrip"}} {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRoundTrip$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envHideSDK+"=1", "PATH="+t.TempDir(), "DOCKER_HOST=tcp://127.0.0.1:1",
			EnvImage+"="+absentImage, EnvEndpoint+"=", EnvBinary+"=", EnvRequire+"="+tc.require)
		out, err := cmd.CombinedOutput()
		cancel()
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), EnvEndpoint+"=host:port") {
			t.Fatalf("%s=%q: want %q and the help text; got (exit %v):\n%s", EnvRequire, tc.require, tc.want, err, out)
		}
		t.Logf("%s=%q: child said %q (exit %v)", EnvRequire, tc.require, tc.want, err)
	}
}

// TestUnavailable: with no endpoint, no binary and no Docker (or no image),
// acquire says
// how to provide an emulator.
func TestUnavailable(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvBinary, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
	t.Setenv(EnvImage, absentImage)
	saved := wellKnownSDKs
	wellKnownSDKs = []string{t.TempDir()}
	t.Cleanup(func() { wellKnownSDKs = saved })

	e, err := acquire(t.Context())
	if e != nil {
		_ = e.Stop()
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("acquire = %v (emulator acquired: %t), want ErrUnavailable", err, e != nil)
	}
	for _, want := range []string{EnvEndpoint + "=host:port", EnvBinary, "Docker"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%v", want, err)
		}
	}
	t.Logf("skip message would be:\n%v", err)
}

// TestBadBinaryIsAnError: an explicit but wrong PUBSUB_EMULATOR_BIN fails
// loudly instead of silently falling back (or skipping).
func TestBadBinaryIsAnError(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvBinary, "/nonexistent/cloud-pubsub-emulator")
	_, err := acquire(t.Context())
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), EnvBinary) {
		t.Fatalf("acquire = %v, want a non-ErrUnavailable error naming %s", err, EnvBinary)
	}
}

// TestDeadExternalEndpoint: a configured endpoint that does not answer is a
// bounded failure that names the variable.
func TestDeadExternalEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	t.Setenv(EnvEndpoint, dead)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = acquire(ctx)
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), EnvEndpoint) {
		t.Fatalf("acquire = %v, want an error naming %s", err, EnvEndpoint)
	}
	t.Logf("%v", err)
}

func TestUniqueID(t *testing.T) {
	for _, p := range []string{"orders", "", "9lives", "a b/c"} {
		id := uniqueID(p)
		if c := id[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') || strings.ContainsAny(id, " /") {
			t.Errorf("uniqueID(%q) = %q: must start with a letter and avoid ' ' and '/'", p, id)
		}
	}
	if a, b := uniqueID("x"), uniqueID("x"); a == b {
		t.Errorf("uniqueID not unique: %q twice", a)
	}
}
