package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/sample"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// The soak: an unbounded Read -> Write pipeline on Prism between two
// emulator topics, fed at a steady rate for PUBSUB_IT_SOAK (default 10m),
// with this process's RSS, goroutines and the connector's gauges sampled
// throughout. A leaked subscriber, publisher, finalization callback or ack
// ID shows as a trend after warm-up.
const (
	envSoak = "PUBSUB_IT_SOAK" // the soak's duration (time.ParseDuration)

	soakDefault     = 10 * time.Minute
	soakRate        = 300 // messages per second
	soakTick        = 100 * time.Millisecond
	soakSize        = 1024            // payload bytes
	soakSampleEvery = 5 * time.Second // one sample of every quantity
	soakWarmUp      = 2 * time.Minute // excluded from the trend
	soakDrain       = 2 * time.Minute // bound on the output catching up
	soakStop        = 2 * time.Minute // bound on the cancelled pipeline returning

	// soakRSSSlopeLimit bounds the RSS trend after warm-up. At 300 msg/s a
	// leak that keeps 120 bytes per message (less than one ack ID with its
	// map entry, far less than a held *pubsub.Message) grows RSS by
	// 300*60*120 B = 2.06 MiB/min; the sawtooth of Go's collector over a
	// 100+-point series moves the fitted slope by well under that.
	soakRSSSlopeLimit = 2.0 // MiB per minute
	// soakGoroutineMargin bounds the rise of the goroutine floor: the
	// fewest goroutines seen in the run's last soakFloorWindow against the
	// fewest in the first window after warm-up. Point samples jitter by
	// about a hundred (Prism and gRPC start goroutines per bundle and per
	// RPC), but the floor is what stays alive; a leaked subscriber or
	// publisher keeps several goroutines each for good, and a per-bundle
	// leak thousands a minute.
	soakGoroutineMargin = 10
	soakFloorWindow     = 2 * time.Minute
)

// soakGauges are the connector's gauges sampled from the running job: the
// source's buffer and pending acks, the sink's in-flight publishes and
// publishers.
var soakGauges = []string{"buffered_messages", "buffered_bytes", "pending_acks", "inflight_messages", "inflight_bytes", "active_publishers"}

func TestSoakReadWrite(t *testing.T) {
	t.Parallel()
	longTests(t)
	duration := soakDuration(t, envSoak, soakDefault, time.Minute)
	warmUp := min(soakWarmUp, duration/2)
	e := emulator.Require(t)
	in := e.CreateTopic(t, "soak-in")
	subIn := e.CreateSubscription(t, in, "soak-in", 60*time.Second)
	out := e.CreateTopic(t, "soak-out")
	subOut := e.CreateSubscription(t, out, "soak-out", 60*time.Second)
	client := e.Client(t)

	// The output is read back while the soak runs, so nothing piles up in
	// the emulator and every arrival is counted as it happens.
	maxMessages := int(duration/time.Second)*soakRate + soakRate
	arrivals := newSoakArrivals(maxMessages)
	verifyCtx, stopVerify := context.WithCancel(context.Background())
	verifyDone := make(chan error, 1)
	go func() {
		verifyDone <- client.Subscriber(subOut.String()).Receive(verifyCtx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			arrivals.add(m.Data)
		})
	}()
	defer func() {
		stopVerify()
		<-verifyDone
	}()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{subIn},
		Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	})
	pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:      out,
		Connection: pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, msgs)

	runCtx, cancelRun := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- beamx.Run(runCtx, p) }()
	stopped := false
	stopPipeline := func() {
		if stopped {
			return
		}
		stopped = true
		cancelRun()
		select {
		case err := <-runDone:
			t.Logf("cancelled pipeline returned: %v", err)
		case <-time.After(soakStop):
			t.Errorf("the cancelled pipeline did not return within %v", soakStop)
		}
	}
	defer stopPipeline()

	start := time.Now()
	var published atomic.Int64
	pubDone := make(chan error, 1)
	go func() { pubDone <- soakPublish(client, in, start.Add(duration), &published) }()

	series := map[string]sample.Series{}
	var jobs *sample.Jobs
	var jobID string
	tick := time.NewTicker(soakSampleEvery)
	defer tick.Stop()
	for sampling := true; sampling; {
		select {
		case err := <-runDone:
			t.Fatalf("the unbounded pipeline returned after %v: %v", time.Since(start).Round(time.Second), err)
		case err := <-pubDone:
			if err != nil {
				t.Fatalf("publisher: %v (published %d)", err, published.Load())
			}
			sampling = false
		case <-tick.C:
		}
		at := time.Since(start)
		mem, err := sample.ReadMemory()
		if err != nil {
			t.Fatal(err)
		}
		add := func(name string, v float64) { series[name] = append(series[name], sample.Point{At: at, Value: v}) }
		add("rss", float64(mem.RSS))
		add("goroutines", float64(sample.Goroutines()))
		if jobID == "" {
			jobs, jobID = findJob(subIn.ID)
		}
		line := fmt.Sprintf("SOAK-SAMPLE t=%ds rss=%.1fMiB goroutines=%d published=%d arrived=%d",
			int(at.Seconds()), float64(mem.RSS)/sample.MiB, sample.Goroutines(), published.Load(), arrivals.distinct())
		if jobID != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			m, err := jobs.Metrics(ctx, jobID, pubsubio.MetricsNamespace)
			cancel()
			if err != nil {
				t.Logf("sampling job metrics at %v: %v", at, err)
			}
			for _, g := range soakGauges {
				if v, ok := m[g]; ok {
					add(g, float64(v))
					line += fmt.Sprintf(" %s=%d", g, v)
				}
			}
		}
		t.Log(line)
	}
	if jobs != nil {
		defer jobs.Close()
	}
	sent := int(published.Load())

	// Every published message must come out; the deadline reports what did.
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), soakDrain)
	defer cancelDrain()
	for arrivals.distinct() < sent && drainCtx.Err() == nil {
		arrivals.wait(drainCtx)
	}
	stopPipeline()

	missing, dups := arrivals.tally(sent)
	t.Logf("SOAK-COUNT duration=%v published=%d arrived_distinct=%d missing=%d duplicates=%d deliveries=%d",
		duration, sent, arrivals.distinct(), len(missing), dups, arrivals.deliveries())
	report := soakReport(t, series, warmUp)
	if len(missing) > 0 {
		t.Errorf("%d of %d published messages never reached the output topic within %v of the end, e.g. indexes %v",
			len(missing), sent, soakDrain, missing[:min(10, len(missing))])
	}

	rss := series["rss"].From(warmUp).Summarize()
	if slope := rss.SlopePerMinute / sample.MiB; slope > soakRSSSlopeLimit {
		t.Errorf("RSS grows %.2f MiB/min after a %v warm-up, limit %.1f MiB/min:\n%s", slope, warmUp, soakRSSSlopeLimit, report)
	}
	g := series["goroutines"]
	end := g[len(g)-1].At
	early := g.From(warmUp).Until(warmUp + soakFloorWindow).Summarize().Min
	late := g.From(end - soakFloorWindow).Summarize().Min
	t.Logf("SOAK-GOROUTINE-FLOOR first %v after warm-up: %.0f, last %v: %.0f", soakFloorWindow, early, soakFloorWindow, late)
	if late > early+soakGoroutineMargin {
		t.Errorf("the goroutine floor rose from %.0f (the %v after warm-up) to %.0f (the last %v), limit +%d:\n%s",
			early, soakFloorWindow, late, soakFloorWindow, soakGoroutineMargin, report)
	}
	if len(series["buffered_messages"]) == 0 {
		t.Errorf("no gauge of the connector was sampled from the running job (job %q)", jobID)
	}
}

// soakPublish publishes soakRate messages a second to topic in batches on a
// fixed tick until the deadline; message i carries emulator.Payload(i,
// soakSize). It stops at the first failure.
func soakPublish(client *pubsub.Client, topic pubsubio.Topic, until time.Time, published *atomic.Int64) error {
	perTick := int(soakRate * soakTick / time.Second)
	tick := time.NewTicker(soakTick)
	defer tick.Stop()
	next := 0
	for now := range tick.C {
		if !now.Before(until) {
			return nil
		}
		req := &pubsubpb.PublishRequest{Topic: topic.String()}
		for range perTick {
			req.Messages = append(req.Messages, &pubsubpb.PubsubMessage{Data: emulator.Payload(next, soakSize)})
			next++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := client.TopicAdminClient.Publish(ctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("publishing messages [%d,%d): %w", next-perTick, next, err)
		}
		published.Store(int64(next))
	}
	return nil
}

// soakArrivals counts, per message index, the deliveries seen on the
// output subscription.
type soakArrivals struct {
	mu       sync.Mutex
	counts   []uint16
	seen     int
	total    int
	invalid  int
	changed  chan struct{}
	maxIndex int
}

func newSoakArrivals(max int) *soakArrivals {
	return &soakArrivals{counts: make([]uint16, max), changed: make(chan struct{}), maxIndex: max}
}

func (a *soakArrivals) add(data []byte) {
	i, err := strconv.Atoi(strings.TrimRight(string(data), "."))
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total++
	if err != nil || i < 0 || i >= a.maxIndex {
		a.invalid++
		return
	}
	if a.counts[i] == 0 {
		a.seen++
	}
	a.counts[i]++
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *soakArrivals) distinct() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen
}

func (a *soakArrivals) deliveries() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total
}

// wait returns when a new message arrived or ctx ends.
func (a *soakArrivals) wait(ctx context.Context) {
	a.mu.Lock()
	ch := a.changed
	a.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// tally returns the indexes below sent that never arrived and the number
// of extra deliveries (duplicates, and anything that was not a soak
// payload).
func (a *soakArrivals) tally(sent int) (missing []int, duplicates int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, c := range a.counts {
		switch {
		case c == 0 && i < sent:
			missing = append(missing, i)
		case c > 1:
			duplicates += int(c) - 1
		}
	}
	return missing, duplicates + a.invalid
}

// soakReport logs the summary of every series (SOAK-SUMMARY lines, whole
// run and after warm-up) and returns it for failure messages.
func soakReport(t *testing.T, series map[string]sample.Series, warmUp time.Duration) string {
	t.Helper()
	var b strings.Builder
	for _, name := range append([]string{"rss", "goroutines"}, soakGauges...) {
		s, ok := series[name]
		if !ok {
			continue
		}
		scale, unit := 1.0, ""
		if name == "rss" || name == "buffered_bytes" || name == "inflight_bytes" {
			scale, unit = sample.MiB, "MiB"
		}
		fmt.Fprintf(&b, "SOAK-SUMMARY %s whole-run %s\n", name, s.Summarize().Format(scale, unit))
		fmt.Fprintf(&b, "SOAK-SUMMARY %s after-%v %s\n", name, warmUp, s.From(warmUp).Summarize().Format(scale, unit))
	}
	t.Log("\n" + b.String())
	return b.String()
}
