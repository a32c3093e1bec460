// Windowedcounts is a streaming windowed count with pubsubio on Prism:
// it reads one or more subscriptions, counts the messages of each key (an
// attribute) in fixed windows of event time, and publishes one result per
// window and key to an output topic, as soon as the watermark passes the
// window's end.
//
// With no flags it needs nothing installed: it starts an in-process
// Pub/Sub server (pstest), publishes at a steady rate for --duration to
// --subscriptions topics in turn while the pipeline runs, each message
// stamped with its event time in an attribute the read takes it from, and
// then prints every window's counts with the time from the window's end to
// its result's publication, and checks each count against what was
// published into that window. The read stops once
// nothing has arrived for --idle, so the example ends by itself (and the
// last windows fire then); a production pipeline leaves it unset.
//
//	go run ./examples/windowedcounts
//	go run ./examples/windowedcounts --emulator=localhost:8085 --rate=200 --duration=30s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

var (
	emulator = flag.String("emulator", "", "host:port of a running Pub/Sub emulator (default: an in-process server)")
	size     = flag.Duration("window", 2*time.Second, "the size of the fixed event-time windows")
	rate     = flag.Int("rate", 50, "messages published per second (the in-process server delivers about 90 a second)")
	duration = flag.Duration("duration", 10*time.Second, "how long to publish")
	keys     = flag.Int("keys", 3, "how many keys the messages cycle through")
	inputs   = flag.Int("subscriptions", 2, "how many input topics, each with a subscription, the messages are spread over")
	idle     = flag.Duration("idle", 5*time.Second, "end the read once nothing has arrived for this long")
)

const project = "windowed-counts"

// keyAttribute is the attribute the counts are keyed by; timeAttribute
// holds each message's event time, set by the publisher (Unix ms).
const (
	keyAttribute  = "key"
	timeAttribute = "event_time"
)

func init() {
	register.Function2x0(keyOf)
	register.Function4x0(toResult)
	register.Emitter1[string]()
	register.Emitter1[pubsubio.Message]()
}

func main() {
	flag.Parse()
	beam.Init()
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "windowedcounts:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	if *size < time.Millisecond || *rate < 1 || *keys < 1 || *inputs < 1 {
		return fmt.Errorf("--window must be at least 1ms, and --rate, --keys and --subscriptions at least 1")
	}
	endpoint := *emulator
	if endpoint == "" {
		srv := pstest.NewServer()
		defer srv.Close()
		endpoint = srv.Addr
		fmt.Printf("Started an in-process Pub/Sub server (pstest) at %s.\n", endpoint)
	}
	conn := pubsubio.Connection{EmulatorEndpoint: endpoint}
	client, err := pubsubio.NewClient(ctx, project, conn)
	if err != nil {
		return err
	}
	defer client.Close()
	env, err := setUp(ctx, client)
	if err != nil {
		return err
	}

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions:      env.inputs,
		TimestampAttribute: timeAttribute,
		IdleTimeout:        *idle,
		Connection:         conn,
	})
	windowed := beam.WindowInto(s, window.NewFixedWindows(*size), beam.ParDo(s, keyOf, msgs))
	counts := stats.Count(s, windowed)
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: env.output, Connection: conn}, beam.ParDo(s, toResult, counts))

	published := make(chan map[cell]int, 1)
	go func() { published <- publish(ctx, client, env.inputTopics) }()
	fmt.Printf("Publishing %d messages a second for %v over %d keys and %d topics; windows of %v.\n", *rate, *duration, *keys, len(env.inputTopics), *size)
	if err := beamx.Run(ctx, p); err != nil {
		return fmt.Errorf("pipeline failed: %w", err)
	}
	return report(ctx, client, env.results, <-published)
}

// keyOf is the message's key.
func keyOf(m pubsubio.Message, emit func(string)) { emit(m.Attributes[keyAttribute]) }

// toResult is the result message of one window and key: the count as
// data, the window's bounds in attributes.
func toResult(w beam.Window, key string, n int, emit func(pubsubio.Message)) {
	iw := w.(window.IntervalWindow)
	emit(pubsubio.Message{
		Data: []byte(strconv.Itoa(n)),
		Attributes: map[string]string{
			keyAttribute:   key,
			"window_start": iw.Start.ToTime().UTC().Format(time.RFC3339Nano),
			"window_end":   iw.End.ToTime().UTC().Format(time.RFC3339Nano),
		},
	})
}

type environment struct {
	inputTopics []pubsubio.Topic
	inputs      []pubsubio.Subscription
	output      pubsubio.Topic
	results     pubsubio.Subscription
}

// setUp creates the input topics with a subscription each, and the output
// topic with a subscription the report reads.
func setUp(ctx context.Context, client *pubsub.Client) (environment, error) {
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	env := environment{
		output:  pubsubio.TopicOf(project, "counts-"+suffix),
		results: pubsubio.SubscriptionOf(project, "counts-"+suffix),
	}
	type pair struct {
		topic pubsubio.Topic
		sub   pubsubio.Subscription
	}
	pairs := []pair{{env.output, env.results}}
	for i := range *inputs {
		name := fmt.Sprintf("events-%d-%s", i, suffix)
		env.inputTopics = append(env.inputTopics, pubsubio.TopicOf(project, name))
		env.inputs = append(env.inputs, pubsubio.SubscriptionOf(project, name))
		pairs = append(pairs, pair{env.inputTopics[i], env.inputs[i]})
	}
	for _, pair := range pairs {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: pair.topic.String()}); err != nil {
			return env, fmt.Errorf("creating %s: %w", pair.topic, err)
		}
		if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: pair.sub.String(), Topic: pair.topic.String(), AckDeadlineSeconds: 60,
		}); err != nil {
			return env, fmt.Errorf("creating %s: %w", pair.sub, err)
		}
	}
	return env, nil
}

// cell is one window, by its start in Unix ms, and key.
type cell struct {
	start int64
	key   string
}

// publish sends *rate messages a second for *duration, to the topics and
// keys in turn, and returns how many it published into each window and key.
func publish(ctx context.Context, client *pubsub.Client, topics []pubsubio.Topic) map[cell]int {
	pubs := make([]*pubsub.Publisher, len(topics))
	for i, t := range topics {
		pubs[i] = client.Publisher(t.String())
		defer pubs[i].Stop()
	}
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	defer tick.Stop()
	end := time.Now().Add(*duration)
	type sent struct {
		at     cell
		result *pubsub.PublishResult
	}
	var all []sent
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		ms, key := time.Now().UnixMilli(), fmt.Sprintf("k%d", i%*keys)
		start := ms - ms%size.Milliseconds() // Beam's fixed windows start at multiples of their size
		all = append(all, sent{cell{start, key}, pubs[i%len(pubs)].Publish(ctx, &pubsub.Message{
			Data:       []byte(fmt.Sprintf("event %d", i)),
			Attributes: map[string]string{keyAttribute: key, timeAttribute: strconv.FormatInt(ms, 10)},
		})})
	}
	want := map[cell]int{}
	for _, m := range all {
		if _, err := m.result.Get(ctx); err == nil {
			want[m.at]++
		}
	}
	return want
}

// report reads every result, prints the counts per window and how long
// after each window's end its results were published, and checks that
// each window and key has one result, counting what was published into it.
func report(ctx context.Context, client *pubsub.Client, results pubsubio.Subscription, want map[cell]int) error {
	published := 0
	for _, n := range want {
		published += n
	}
	type row struct {
		start, end time.Time
		key        string
		n          int
		latency    time.Duration
	}
	var (
		mu   sync.Mutex
		rows []row
	)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	total := 0
	err := client.Subscriber(results.String()).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		start, _ := time.Parse(time.RFC3339Nano, m.Attributes["window_start"])
		end, _ := time.Parse(time.RFC3339Nano, m.Attributes["window_end"])
		n, _ := strconv.Atoi(string(m.Data))
		mu.Lock()
		defer mu.Unlock()
		rows = append(rows, row{start, end, m.Attributes[keyAttribute], n, m.PublishTime.Sub(end)})
		if total += n; total >= published {
			cancel()
		}
	})
	if err != nil {
		return err
	}
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].start.Equal(rows[j].start) {
			return rows[i].start.Before(rows[j].start)
		}
		return rows[i].key < rows[j].key
	})
	var latencies []time.Duration
	for _, r := range rows {
		fmt.Printf("  [%s, %s) %s: %3d   published %v after the window's end\n",
			r.start.Format("15:04:05.000"), r.end.Format("15:04:05.000"), r.key, r.n, r.latency.Round(time.Millisecond))
		latencies = append(latencies, r.latency)
	}
	if len(latencies) == 0 {
		return fmt.Errorf("no window produced a result; %d messages were published", published)
	}
	slices.Sort(latencies)
	fmt.Printf("%d results; window end to result: p50 %v, max %v (the last windows fire when the read ends, %v idle).\n",
		len(rows), latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), *idle)
	got := map[cell]int{}
	for _, r := range rows {
		c := cell{r.start.UnixMilli(), r.key}
		if _, twice := got[c]; twice {
			return fmt.Errorf("window %v key %s has more than one result", r.start.Format("15:04:05.000"), r.key)
		}
		got[c] = r.n
	}
	for c, n := range want {
		if got[c] != n {
			return fmt.Errorf("window %v key %s counted %d messages, %d were published into it", time.UnixMilli(c.start).UTC().Format("15:04:05.000"), c.key, got[c], n)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d windows and keys have results, %d were published into", len(got), len(want))
	}
	fmt.Printf("Every window and key has one result, counting each of the %d published messages once.\n", published)
	return nil
}
