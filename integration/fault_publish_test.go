package integration

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/faultproxy"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Publishes failing UNAVAILABLE in the middle of a bundle: the write goes
// through the fault proxy, which a step fused before the writer makes
// refuse and close every connection at its n-th message.

func init() {
	register.DoFn2x0[pubsubio.Message, func(pubsubio.Message)](&faultAtFn{})
}

// faultAtFn passes messages through and, at the At-th message it sees in
// this process, injects Fault's fault into the proxy named Name: mid-bundle,
// with the messages before it already handed to the writer.
type faultAtFn struct {
	Name string
	At   int64
}

// faultAt is what a faultAtFn does when it fires.
type faultAt struct {
	seen  atomic.Int64
	fired chan struct{}
	fault func()
}

var faults sync.Map // name -> *faultAt

func (f *faultAtFn) ProcessElement(m pubsubio.Message, emit func(pubsubio.Message)) {
	if v, ok := faults.Load(f.Name); ok {
		fa := v.(*faultAt)
		if fa.seen.Add(1) == f.At {
			fa.fault()
			close(fa.fired)
		}
	}
	emit(m)
}

// (b) Publishes failing UNAVAILABLE during a bundle: a Write of 1,000
// messages through the proxy, which, at the 300th message of the bundle,
// once Pub/Sub confirmed a first publish, refuses every new connection and
// closes the open ones. The client retries
// until the publisher's 3 s timeout; the bundle fails, and the job with it.
// Once the proxy accepts again, a rerun of the same pipeline delivers every
// message.
func TestFaultPublishUnavailableMidBundle(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	client := e.Client(t)
	proxy := startProxy(t, e.Endpoint)
	topic := e.CreateTopic(t, "fault-publish")
	outSub := e.CreateSubscription(t, topic, "fault-publish", 0)
	const n, size, at = 1000, 64, 300
	name := t.Name()
	fa := &faultAt{fired: make(chan struct{}), fault: func() {
		// Once Pub/Sub answered a first publish (message IDs are more than
		// the 40 bytes of connection set-up), so the outage lands on a
		// writer that is connected and has published part of its bundle.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := proxy.Await(ctx, func(s faultproxy.Stats) bool { return s.BytesToClient >= 1024 }); err != nil {
			t.Errorf("no publish went through before the fault: %v", err)
		}
		proxy.Refuse()
		proxy.DropAll()
	}}
	faults.Store(name, fa)
	t.Cleanup(func() { faults.Delete(name) })
	cfg := pubsubio.WriteConfig{
		Topic: topic,
		// Short, so that the outage surfaces in seconds: the client retries
		// UNAVAILABLE until this timeout, 60 s by default.
		Publisher:  pubsubio.PublisherOptions{Timeout: 3 * time.Second, RetryInitialBackoff: 50 * time.Millisecond, RetryMaxBackoff: 500 * time.Millisecond},
		Connection: pubsubio.Connection{EmulatorEndpoint: proxy.Addr()},
	}
	through := func(s beam.Scope, col beam.PCollection) beam.PCollection {
		return beam.ParDo(s, &faultAtFn{Name: name, At: at}, col)
	}

	p, _ := writePipeline(t, cfg, sinkMessages(n, size, nil), through)
	run := runInBackground(p, 2*time.Minute)
	run.wait(t, 2*time.Minute)
	select {
	case <-fa.fired:
	default:
		t.Fatalf("the fault never fired: the writer saw %d of %d messages (job: %v)", fa.seen.Load(), n, run.err)
	}
	if run.err == nil {
		t.Fatalf("the job succeeded in %v although every connection was refused from its %d-th message on (proxy %+v)", run.took, at, proxy.Stats())
	}
	if s := run.err.Error(); !strings.Contains(s, topic.String()) || !(strings.Contains(s, "Unavailable") || strings.Contains(s, "UNAVAILABLE") || strings.Contains(s, "DeadlineExceeded") || strings.Contains(s, "DEADLINE_EXCEEDED")) {
		t.Errorf("the failure names neither the topic nor the status:\n%v", run.err)
	}
	t.Logf("failed job: ended after %v; proxy %+v; error: %s", run.took.Round(time.Millisecond), proxy.Stats(), excerpt(run.err, "pubsubio.Write"))

	proxy.Accept()
	// The rerun's messages count on from n: the fault does not fire again.
	p, dead := writePipeline(t, cfg, sinkMessages(n, size, nil), through)
	rerun := runInBackground(p, 2*time.Minute)
	rerun.wait(t, 2*time.Minute)
	if rerun.err != nil {
		t.Fatalf("the rerun failed: %v", rerun.err)
	}
	if got := collect.Len(dead); got != 0 {
		t.Errorf("%d dead letters", got)
	}
	_, got := receive(t, client, outSub, n, 2*time.Minute)
	dups := 0
	for i := range n {
		switch c := got[string(emulator.Payload(i, size))]; {
		case c == 0:
			t.Errorf("message %d never arrived", i)
		case c > 1:
			dups += c - 1
		}
	}
	t.Logf("rerun: ok in %v, records_sent %d; on the topic: %d distinct, %d duplicates (published by the failed job before the outage)",
		rerun.took.Round(time.Millisecond), counter(rerun.res, "records_sent"), len(got), dups)
}
