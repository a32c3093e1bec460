package source

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"

	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/commit"
)

// useFinalization decides at graph construction whether the read DoFn
// declares bundle finalization (internal/commit says why it may not). The
// launcher and the workers run the same binary, so the SDK version
// compiled in is the workers' too.
func useFinalization(mode FinalizationMode, sdkVersion string) bool {
	switch mode {
	case FinalizationOn:
		return true
	case FinalizationOff:
		return false
	}
	return commit.DeliversFinalization(sdkVersion)
}

// sdkVersion is the Beam SDK compiled into this binary.
var sdkVersion = core.SdkVersion
