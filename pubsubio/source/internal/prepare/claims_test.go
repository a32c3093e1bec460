package prepare

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph"
)

// A pipeline's claims go once the pipeline is garbage collected: building
// many pipelines in one process does not grow them. pipelineOf finds the
// graph in Beam's Scope; if a Beam version keeps it elsewhere, shared
// subscriptions go unrefused, and this fails.
func TestClaimsForgottenWithThePipeline(t *testing.T) {
	key := func() weak.Pointer[graph.Graph] {
		_, s := beam.NewPipelineWithRoot()
		g := pipelineOf(s)
		if g == nil {
			t.Fatal("pipelineOf finds no graph in beam.Scope: this Beam version keeps it elsewhere, and shared subscriptions go unrefused")
		}
		if err := Claim(s, testSubs(1), Owned{}); err != nil {
			t.Fatal(err)
		}
		return weak.Make(g)
	}()
	held := func() bool {
		claims.mu.Lock()
		defer claims.mu.Unlock()
		_, ok := claims.byGraph[key]
		return ok
	}
	if !held() {
		t.Fatal("the pipeline has no claims")
	}
	const limit = time.Minute
	for deadline := time.Now().Add(limit); held(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the collected pipeline's claims are still held after %v", limit)
		}
		runtime.GC()
	}
}
