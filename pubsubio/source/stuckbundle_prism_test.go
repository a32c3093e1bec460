package source

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.DoFn1x0[model.Message](&blockOnFirst{})
	register.DoFn1x1[[]byte, error](&failWhenStuck{})
}

// stuckRun is how the DoFns of one run of
// TestStoppedWorkerReleasesAStuckSplit meet: got closes once the read's
// bundle is stuck, and unblock lets it go at the test's end.
type stuckRun struct {
	got, unblock chan struct{}
	once         sync.Once
}

// stuckRuns are the runs by key; a stuck bundle outlives its run's test.
var stuckRuns sync.Map

func newStuckRun(t *testing.T) string {
	key := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	r := &stuckRun{got: make(chan struct{}), unblock: make(chan struct{})}
	stuckRuns.Store(key, r)
	t.Cleanup(func() { close(r.unblock) })
	return key
}

func stuckRunOf(key string) *stuckRun {
	r, _ := stuckRuns.Load(key)
	return r.(*stuckRun)
}

// blockOnFirst never returns from its first message until the test ends,
// ignoring its context: a stage fused after the read that hangs.
type blockOnFirst struct{ Run string }

func (fn blockOnFirst) ProcessElement(model.Message) {
	r := stuckRunOf(fn.Run)
	r.once.Do(func() { close(r.got) })
	<-r.unblock
}

// failWhenStuck fails the job once the read's bundle is stuck.
type failWhenStuck struct{ Run string }

func (fn failWhenStuck) ProcessElement([]byte) error {
	select {
	case <-stuckRunOf(fn.Run).got:
		return errors.New("failing the job while the read's bundle is stuck, as the test asks")
	case <-time.After(2 * time.Minute):
		return errors.New("the read emitted nothing in 2m")
	}
}

// A job fails while the read's bundle hangs in a DoFn fused after it, and
// the worker lives on in the process (Prism here; LOOPBACK anywhere). The
// runner stops the worker, whose context ends: the split is released and
// every message it held goes back to Pub/Sub at once, instead of staying
// leased until MaxExtension (60 min).
func TestStoppedWorkerReleasesAStuckSplit(t *testing.T) {
	skipUnderShort(t)
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "stuck-bundle", 1)
	ids := f.publish(t, topic, 20, nil)
	run := newStuckRun(t)

	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, blockOnFirst{Run: run}, Read(s, Config{Subscriptions: subs, Connection: f.conn, MaxDurationPerAckExtension: 10 * time.Second}))
	beam.ParDo0(s, failWhenStuck{Run: run}, beam.Impulse(s))
	errc := make(chan error, 1)
	go func() { errc <- ptest.Run(p) }()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "failing the job while") {
			t.Fatalf("pipeline error %v, want failWhenStuck's", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the job did not fail within 3m")
	}

	// Back on the subscription: what the split held is nacked, and what the
	// client's shutdown strands on its stream lapses with the stream's
	// lease, MaxDurationPerAckExtension.
	const limit = time.Minute
	got := f.receiveAll(t, subs[0], len(ids), limit)
	if len(got) < len(ids) {
		var missing []string
		for _, id := range ids {
			if !got[id] {
				m := f.srv.Message(id)
				missing = append(missing, fmt.Sprintf("%s (deliveries %d, acks %d, modacks %+v)", id, m.Deliveries, m.Acks, m.Modacks))
			}
		}
		t.Fatalf("%d of %d messages back on the subscription within %v of the job's failure; missing: %v", len(got), len(ids), limit, missing)
	}
}
