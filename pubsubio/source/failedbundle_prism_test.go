package source

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.DoFn1x1[model.Message, error](&failOn{})
}

// failOn fails the bundle that carries the message whose payload is Data.
type failOn struct{ Data string }

func (f *failOn) ProcessElement(m model.Message) error {
	if string(m.Data) == f.Data {
		return fmt.Errorf("failing on %s, as the test asks", f.Data)
	}
	return nil
}

// A DoFn that fails mid-stream fails the read's bundle, and what that
// bundle emitted is given back before the job's failure reaches the
// launcher: pstest has recorded a ModifyAckDeadline of 0 for the message
// the DoFn failed on, which was never acked. Beam Go does not tear down a
// failed bundle, so the client's batched nack alone could still be unsent;
// it may also land in time, so without the RPC this test fails often, not
// always (it failed the one run tried). TestSplitReaderGiveBackNacksFromSeq
// pins the RPC itself.
func TestFailedBundleGivesBackBeforeTheJobFailsOnPrism(t *testing.T) {
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "failing-dofn", 1)
	ids := f.publish(t, topic, 20, nil)
	const poison = "message-7"

	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &failOn{Data: poison}, Read(s, Config{Subscriptions: subs, IdleTimeout: 10 * time.Second, Connection: f.conn}))
	errc := make(chan error, 1)
	go func() { errc <- ptest.Run(p) }()
	var err error
	select {
	case err = <-errc:
	case <-time.After(3 * time.Minute):
		t.Fatal("the job did not fail within 3m")
	}
	if err == nil || !strings.Contains(err.Error(), "failing on "+poison) {
		t.Fatalf("pipeline error %v, want the DoFn's failure", err)
	}
	m := f.srv.Message(ids[7])
	if m.Acks != 0 {
		t.Errorf("%s was acked %d times, although its bundle failed", poison, m.Acks)
	}
	if !f.givenBack(ids[7]) {
		t.Errorf("%s: modacks %+v when the job failed, want a ModifyAckDeadline of 0 (the give-back)", poison, m.Modacks)
	}
}
