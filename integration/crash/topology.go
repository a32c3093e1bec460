package crash

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Bounds. A killed process's messages stay leased for at most the
// pipeline's --max_ack_extension (10 s) or the subscription's ack deadline
// (10 s), so every wait below leaves several lease periods of room.
const (
	ackDeadline   = 10 * time.Second // input subscription
	completeLimit = 12 * time.Minute // completion runs, all together (a replay needed 7.5 min)
	arrivalLimit  = 2 * time.Minute  // the last outputs to show up, and a failing test's diagnosis

	payloadSize = 256

	// SettleLimit bounds the wait for outputs once a completion run ended:
	// it published them before exiting.
	SettleLimit = 10 * time.Second

	// IdleTimeout ends a completion run this long after its last message.
	IdleTimeout = 30 * time.Second
	// RunLimit bounds one completion run: 20,000 messages on a loaded box.
	RunLimit = 10 * time.Minute
	// ProgressLimit bounds the wait for a kill point given as output
	// progress: the previous kill's leases lapse within about 10 s, and the
	// process needs a few seconds to start.
	ProgressLimit = 2 * time.Minute
)

// Topology is one crash test's Pub/Sub resources and backlog: an input
// topic and subscription holding the backlog, an output topic, and the
// watcher of its subscription.
type Topology struct {
	e        *emulator.Emulator
	inTopic  model.Topic
	inSub    model.Subscription
	outTopic model.Topic
	inputIDs []string // published backlog
	// Out watches the output topic for the whole test.
	Out *OutputWatcher
}

// NewTopology creates an input topic and subscription, an output topic
// and subscription, starts watching the output and publishes n messages,
// message i with attrs(i) (attrs may be nil).
func NewTopology(t testing.TB, e *emulator.Emulator, prefix string, n int, attrs func(i int) map[string]string) *Topology {
	t.Helper()
	in := e.CreateTopic(t, prefix+"-in")
	c := &Topology{
		e:        e,
		inTopic:  in,
		inSub:    e.CreateSubscription(t, in, prefix+"-in", ackDeadline),
		outTopic: e.CreateTopic(t, prefix+"-out"),
	}
	outSub := e.CreateSubscription(t, c.outTopic, prefix+"-out", 60*time.Second)
	c.Out = watchOutput(t, e.Client(t), outSub)
	start := time.Now()
	c.inputIDs = e.Publish(t, in, n, payloadSize, attrs)
	t.Logf("published %d messages of %d bytes in %v", n, payloadSize, time.Since(start).Round(time.Millisecond))
	return c
}

// KeepOutput creates a second subscription on the output topic, which
// keeps every copy the runs publish, for a read after them; call it before
// the first run.
func (c *Topology) KeepOutput(t testing.TB) model.Subscription {
	t.Helper()
	return c.e.CreateSubscription(t, c.outTopic, "kept-out", time.Minute)
}

// RepublishOutputs publishes to the output topic a second copy of the
// outputs of the first n input IDs, as a run that crashed after its
// publish would: a check of what reads the output then meets copies
// whatever the kills did.
func (c *Topology) RepublishOutputs(t testing.TB, n int) {
	t.Helper()
	ids := c.inputIDs[:min(n, len(c.inputIDs))]
	c.e.Publish(t, c.outTopic, len(ids), 16, func(i int) map[string]string {
		return map[string]string{InputIDAttribute: ids[i]}
	})
}

// Args returns crashpipeline's flags for this topology plus extra.
func (c *Topology) Args(extra ...string) []string {
	return append([]string{
		"--emulator=" + c.e.Endpoint,
		"--subscription=" + c.inSub.String(),
		"--output_topic=" + c.outTopic.String(),
	}, extra...)
}

// ArgsFor returns crashpipeline's flags for one job that reads every
// topology of cs, each through the shape of the same index (--shapes),
// plus extra.
func ArgsFor(cs []*Topology, shapes []string, extra ...string) []string {
	var subs, outs []string
	for _, c := range cs {
		subs = append(subs, c.inSub.String())
		outs = append(outs, c.outTopic.String())
	}
	return append([]string{
		"--emulator=" + cs[0].e.Endpoint,
		"--subscription=" + strings.Join(subs, ","),
		"--output_topic=" + strings.Join(outs, ","),
		"--shapes=" + strings.Join(shapes, ","),
	}, extra...)
}

// Complete runs the pipeline bin bounded by idleness, again and again
// until every input ID is on the output or completeLimit has passed, and
// returns how many runs it took. More than one run is normal on the
// emulator: it gives a killed consumer's messages back 30-60 s after the
// kill, sometimes later (measured), and a run can end idle before that;
// those messages are late, not lost. A message still missing at the end is
// reported by Verify.
func (c *Topology) Complete(t testing.TB, bin string, extra ...string) (runs int) {
	t.Helper()
	return c.CompleteWithin(t, bin, completeLimit, extra...)
}

// CompleteWithin is Complete with limit instead of completeLimit: with 0,
// one run.
func (c *Topology) CompleteWithin(t testing.TB, bin string, limit time.Duration, extra ...string) (runs int) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for runs = 1; ; runs++ {
		p := Start(t, bin, fmt.Sprintf("completion-%d", runs), c.Args(append(extra, "--idle_timeout="+IdleTimeout.String())...)...)
		start := time.Now()
		if err := p.Wait(RunLimit); err != nil {
			t.Fatalf("completion run %d: %v", runs, err)
		}
		if !strings.Contains(p.Stdout(), DoneLine) {
			t.Fatalf("completion run %d exited 0 without %q; stdout:\n%s", runs, DoneLine, p.Stdout())
		}
		missing := c.Out.awaitAll(c.inputIDs, SettleLimit)
		t.Logf("completion run %d took %v; %d of %d input IDs on the output", runs, time.Since(start).Round(time.Millisecond), len(c.inputIDs)-len(missing), len(c.inputIDs))
		if len(missing) == 0 || !time.Now().Before(deadline) {
			return runs
		}
	}
}

// InputIDs returns the IDs of the published backlog, indexed like the
// messages.
func (c *Topology) InputIDs() []string { return c.inputIDs }

// Lost returns the input IDs missing from the output after waiting up to
// within for the last ones, and logs the summary line RELIABILITY.md's
// figures come from.
func (c *Topology) Lost(t testing.TB, within time.Duration, variant string, seed int64, kills, completionRuns int, took time.Duration) []string {
	t.Helper()
	missing := c.Out.awaitAll(c.inputIDs, within)
	st := c.Out.stats(c.inputIDs)
	t.Logf("CRASH SUMMARY variant=%s messages=%d kills=%d seed=%d lost=%d duplicates=%d duplicated_inputs=%d output_deliveries=%d completion_runs=%d took=%v",
		variant, len(c.inputIDs), kills, seed, len(missing), st.duplicates, st.duplicatedInputs, st.deliveries, completionRuns, took.Round(time.Second))
	return missing
}

// Verify fails the test for every input ID missing from the output, and
// logs the summary line (Lost).
func (c *Topology) Verify(t testing.TB, variant string, seed int64, kills, completionRuns int, took time.Duration) {
	t.Helper()
	missing := c.Lost(t, arrivalLimit, variant, seed, kills, completionRuns, took)
	if len(missing) > 0 {
		back := c.stillUnacked(t, missing, arrivalLimit)
		t.Errorf("%d of %d input messages never reached the output topic (replay with %s=%d), e.g. %v; "+
			"%d of them were still unacked on the input subscription (delivered again to a plain receiver within %v), the other %d were not",
			len(missing), len(c.inputIDs), EnvSeed, seed, missing[:min(10, len(missing))],
			len(back), arrivalLimit, len(missing)-len(back))
	}
}

// stillUnacked receives the input subscription with a plain client for up
// to timeout and returns which of ids Pub/Sub delivered again: those were
// never acked (late, not lost); the rest were acked without reaching the
// output. It acks what it receives, so it is only for a failing test's
// diagnosis.
func (c *Topology) stillUnacked(t testing.TB, ids []string, timeout time.Duration) map[string]time.Duration {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	var mu sync.Mutex
	back := map[string]time.Duration{}
	err := c.e.Client(t).Subscriber(c.inSub.String()).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if want[m.ID] {
			if _, ok := back[m.ID]; !ok {
				back[m.ID] = time.Since(start)
			}
		}
		if len(back) == len(want) {
			cancel()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	var last time.Duration
	for _, d := range back {
		last = max(last, d)
	}
	t.Logf("diagnosis: %d of %d missing IDs came back from %s within %v (the last after %v); Receive: %v", len(back), len(want), c.inSub, timeout, last.Round(time.Millisecond), err)
	return back
}

// PublishMore publishes n more messages to the input topic and returns
// their IDs, which InputIDs then includes.
func (c *Topology) PublishMore(t testing.TB, n int) []string {
	t.Helper()
	ids := c.e.Publish(t, c.inTopic, n, payloadSize, nil)
	c.inputIDs = append(c.inputIDs, ids...)
	return ids
}
