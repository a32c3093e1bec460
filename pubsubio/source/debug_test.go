package source

import (
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var dbgMu sync.Mutex
var dbgSeen = map[string]int{}

type dbgFn struct{}

func (dbgFn) ProcessElement(m model.Message) {
	dbgMu.Lock()
	dbgSeen[m.Subscription.ID+"/"+m.ID]++
	dbgMu.Unlock()
}

func init() { register.DoFn1x0[model.Message](&dbgFn{}) }

func TestDebugAcks(t *testing.T) {
	dbgSeen = map[string]int{}
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "bounded", 2)
	ids := f.publish(t, topic, 200, nil)
	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, Config{Subscriptions: subs, Splits: 3, MaxMessages: 200, IdleTimeout: 5 * time.Second, Connection: f.conn})
	beam.ParDo0(s, &dbgFn{}, msgs)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	for k, v := range dbgSeen {
		if v > 1 {
			t.Logf("dup %s %d", k, v)
		}
	}
	for _, id := range ids {
		m := f.srv.Message(id)
		if m.Acks < 2 {
			t.Errorf("message %s: %d acks, %d deliveries; seen sub0=%d sub1=%d", id, m.Acks, m.Deliveries, dbgSeen[subs[0].ID+"/"+id], dbgSeen[subs[1].ID+"/"+id])
		}
	}
}
