package source

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph"
)

func TestUseFinalization(t *testing.T) {
	cases := []struct {
		mode    FinalizationMode
		version string
		want    bool
	}{
		{FinalizationAuto, "2.77.0", false},
		{FinalizationAuto, "2.76.0", false},
		{FinalizationAuto, "2.70.3", false},
		{FinalizationAuto, "1.99.99", false},
		{FinalizationAuto, "2.77.1", true},
		{FinalizationAuto, "2.78.0", true},
		{FinalizationAuto, "2.100.0", true},
		{FinalizationAuto, "3.0.0", true},
		// Pre-releases with a "-suffix" sort with their release.
		{FinalizationAuto, "2.78.0-SNAPSHOT", true},
		{FinalizationAuto, "2.77.0-SNAPSHOT", false},
		{FinalizationAuto, "2.78.0-rc1", true},
		// What the code defines for anything else (Beam's own dev builds
		// are "X.Y.Z.dev"): unparseable, so no finalization.
		{FinalizationAuto, "2.78.0.dev", true}, // a dev build sorts with its release
		{FinalizationAuto, "", false},
		{FinalizationAuto, "garbage", false},
		{FinalizationAuto, "2.78", false},
		{FinalizationAuto, "v2.78.0", false},
		{FinalizationAuto, "2.x.0", false},
		// The unset mode is AUTO.
		{"", "2.77.0", false},
		{"", "2.78.0", true},
		// Forcing either way ignores the version.
		{FinalizationOn, "2.77.0", true},
		{FinalizationOn, "2.60.0", true},
		{FinalizationOn, "garbage", true},
		{FinalizationOff, "2.78.0", false},
		{FinalizationOff, "3.0.0", false},
	}
	for _, c := range cases {
		if got := useFinalization(c.mode, c.version); got != c.want {
			t.Errorf("useFinalization(%q, %q) = %v, want %v", c.mode, c.version, got, c.want)
		}
	}
}

// TryRead builds the DoFn that declares finalization only when
// useFinalization says so for the SDK compiled in.
func TestTryReadPicksTheDoFnBySDKVersion(t *testing.T) {
	prev := sdkVersion
	t.Cleanup(func() { sdkVersion = prev })
	cases := []struct {
		version    string
		mode       FinalizationMode
		finalizing bool
	}{
		{"2.77.0", FinalizationAuto, false},
		{"2.78.0", FinalizationAuto, true},
		{"2.77.0", FinalizationOn, true},
		{"2.78.0", FinalizationOff, false},
	}
	for _, c := range cases {
		sdkVersion = c.version
		p, s := beam.NewPipelineWithRoot()
		cfg := validConfig()
		cfg.Finalization = c.mode
		if _, err := TryRead(s, cfg); err != nil {
			t.Errorf("SDK %s, mode %s: TryRead: %v", c.version, c.mode, err)
			continue
		}
		edges, _, err := p.Build()
		if err != nil {
			t.Errorf("SDK %s, mode %s: build: %v", c.version, c.mode, err)
			continue
		}
		var kinds []string
		for _, e := range edges {
			if e.DoFn == nil {
				continue
			}
			switch (*graph.Fn)(e.DoFn).Recv.(type) {
			case *readFn:
				kinds = append(kinds, "readFn")
			case *finalizingReadFn:
				kinds = append(kinds, "finalizingReadFn")
			}
		}
		want := "readFn"
		if c.finalizing {
			want = "finalizingReadFn"
		}
		if len(kinds) != 1 || kinds[0] != want {
			t.Errorf("SDK %s, mode %s: read DoFns %v, want [%s]", c.version, c.mode, kinds, want)
		}
	}
}
