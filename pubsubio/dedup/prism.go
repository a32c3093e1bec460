package dedup

import (
	"strings"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/jobprep"
)

// noPrismSplits is the experiment that turns off Prism's splits of running
// bundles. Prism (Beam 2.77) splits a stalled bundle of a stateful stage
// and releases the keys of the residual elements while the stalled bundle
// still holds earlier elements of them; a new bundle then takes such a key
// with state that lacks the stalled bundle's writes, and one more copy
// passes per split (docs/upstream/prism-split-stateful-keys.md). Other
// runners ignore it; the read never accepts these splits anyway.
const noPrismSplits = "prism_disable_sdf_split"

// requirePrismSplitsOff adds noPrismSplits to every job this process
// submits that holds a Deduplicate.
func requirePrismSplitsOff() {
	jobprep.AddExperiment(noPrismSplits, holdsDeduplicate)
}

// holdsDeduplicate says whether p has a transform of Deduplicate's.
func holdsDeduplicate(p *pipepb.Pipeline) bool {
	for _, t := range p.GetComponents().GetTransforms() {
		if name := t.GetUniqueName(); strings.HasPrefix(name, api+"/") || strings.Contains(name, "/"+api+"/") {
			return true
		}
	}
	return false
}
