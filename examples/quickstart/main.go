// Quickstart reads two Pub/Sub subscriptions with pubsubio on Prism, Beam
// Go's local runner, writes what it read to one output topic per
// subscription, and shows that every message was read, acked and published.
//
// With no flags it needs nothing installed: it starts an in-process Pub/Sub
// server (pstest), creates a topic with two subscriptions, publishes sample
// messages and reads them back with a bounded read. The output topics do
// not exist beforehand: the sink creates them (dynamic destinations).
// Against real Pub/Sub (--project) it only reads; --idle=0 then reads
// unbounded, a streaming job.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart --emulator=localhost:8085
//	go run ./examples/quickstart --project=my-project --subscription=orders --subscription=returns
//	go run ./examples/quickstart --project=my-project --subscription=orders --idle=0 \
//	    --runner=dataflow --region=us-central1 --staging_location=gs://my-bucket/staging
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/gcpopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/top"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

var (
	emulator = flag.String("emulator", "", "host:port of a running Pub/Sub emulator; the quickstart creates its own topic and subscriptions there")
	// --project is Beam's own flag (gcpopts): the project of --subscription.
	project       = gcpopts.Project
	messages      = flag.Int("messages", 300, "how many sample messages to publish (embedded server and --emulator)")
	idle          = flag.Duration("idle", 5*time.Second, "finish once nothing has arrived for this long (0, with --project: read unbounded)")
	subscriptions stringList
)

func init() {
	flag.Var(&subscriptions, "subscription", "subscription ID to read in --project (repeatable)")
	register.Function2x0(bySubscription)
	register.Function1x1(toOutputTopic)
	register.Emitter1[string]()
	register.Function1x1(describe)
	register.Function2x1(less)
	register.Function2x0(printCount)
	register.Function1x0(printSamples)
}

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg := pubsubio.ReadConfig{IdleTimeout: *idle}
	write := false
	var check func(res beam.PipelineResult) error
	switch {
	case *project != "":
		if *emulator != "" || len(subscriptions) == 0 {
			return fmt.Errorf("--project reads real Pub/Sub: give at least one --subscription and no --emulator")
		}
		for _, id := range subscriptions {
			cfg.Subscriptions = append(cfg.Subscriptions, pubsubio.SubscriptionOf(*project, id))
		}
		fmt.Printf("Reading %d subscription(s) of %s until idle for %v.\n", len(subscriptions), *project, *idle)
	default:
		endpoint := *emulator
		var srv *pstest.Server
		if endpoint == "" {
			srv = pstest.NewServer()
			defer srv.Close()
			endpoint = srv.Addr
			fmt.Printf("Started an in-process Pub/Sub server (pstest) at %s.\n", endpoint)
		}
		cfg.Connection = pubsubio.Connection{EmulatorEndpoint: endpoint}
		subs, err := setUp(ctx, cfg.Connection, *messages)
		if err != nil {
			return err
		}
		cfg.Subscriptions = subs
		cfg.MaxMessages = int64(*messages)
		write = true
		check = func(res beam.PipelineResult) error {
			want := int64(*messages * len(subs))
			if got := counter(res, "messages_emitted"); got < want {
				return fmt.Errorf("read %d messages, want %d", got, want)
			}
			if got := counter(res, "records_sent"); got < want {
				return fmt.Errorf("published %d messages, want %d", got, want)
			}
			if srv != nil {
				return checkServer(srv, subs, *messages)
			}
			return nil
		}
	}

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, cfg)
	counts := stats.Count(s, beam.ParDo(s, bySubscription, msgs))
	beam.ParDo0(s, printCount, counts)
	beam.ParDo0(s, printSamples, top.Smallest(s, beam.ParDo(s, describe, msgs), 5, less))
	if write {
		// One output topic per input subscription; the sink creates each.
		pubsubio.Write(s, pubsubio.WriteConfig{Connection: cfg.Connection}, beam.ParDo(s, toOutputTopic, msgs))
	}

	res, err := beamx.RunWithMetrics(ctx, p)
	if err != nil {
		return fmt.Errorf("pipeline failed: %w", err)
	}
	if res == nil {
		// Submitted without waiting (Dataflow, or its --dry_run, which only
		// translates the pipeline): there is nothing to report.
		fmt.Println("The runner returned no result to report on.")
		return nil
	}
	fmt.Printf("Read %d messages; acked %d after their bundles committed.\n",
		counter(res, "messages_emitted"), counter(res, "messages_acked"))
	if write {
		fmt.Printf("Published %d messages to %d output topics the sink created.\n",
			counter(res, "records_sent"), counter(res, "topics_created"))
	}
	if check != nil {
		return check(res)
	}
	return nil
}

// toOutputTopic sends each message to the output topic of its subscription.
func toOutputTopic(m pubsubio.Message) pubsubio.Message {
	return pubsubio.Message{
		Data:       m.Data,
		Attributes: map[string]string{"source_message_id": m.ID},
		Topic:      outputTopic(m.Subscription),
	}
}

func outputTopic(sub pubsubio.Subscription) pubsubio.Topic {
	return pubsubio.TopicOf(sub.Project, sub.ID+"-out")
}

// setUp creates a topic with two subscriptions and publishes n messages.
func setUp(ctx context.Context, conn pubsubio.Connection, n int) ([]pubsubio.Subscription, error) {
	const proj = "quickstart-project"
	client, err := pubsubio.NewClient(ctx, proj, conn)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	suffix := time.Now().Format("150405.000")
	topic := pubsubio.TopicOf(proj, "quickstart-"+strings.ReplaceAll(suffix, ".", "-"))
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic.String()}); err != nil {
		return nil, fmt.Errorf("creating %s: %w", topic, err)
	}
	var subs []pubsubio.Subscription
	for _, name := range []string{"orders", "audit"} {
		sub := pubsubio.SubscriptionOf(proj, topic.ID+"-"+name)
		if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: sub.String(), Topic: topic.String(), AckDeadlineSeconds: 30,
		}); err != nil {
			return nil, fmt.Errorf("creating %s: %w", sub, err)
		}
		subs = append(subs, sub)
	}
	pub := client.Publisher(topic.String())
	defer pub.Stop()
	results := make([]*pubsub.PublishResult, n)
	for i := range results {
		results[i] = pub.Publish(ctx, &pubsub.Message{
			Data:       fmt.Appendf(nil, `{"order": %d, "amount": %d}`, i, 10+i%90),
			Attributes: map[string]string{"source": "quickstart"},
		})
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			return nil, fmt.Errorf("publishing to %s: %w", topic, err)
		}
	}
	fmt.Printf("Published %d messages to %s, read through %d subscriptions.\n", n, topic, len(subs))
	return subs, nil
}

// checkServer reads back from the embedded server: every input message
// acked on each subscription, and each output topic holding what its
// subscription read.
func checkServer(srv *pstest.Server, subs []pubsubio.Subscription, n int) error {
	perTopic := map[string]int{}
	var short []string
	inputs := 0
	for _, m := range srv.Messages() {
		if m.Attributes["source_message_id"] != "" {
			perTopic[m.Topic]++
			continue
		}
		inputs++
		if m.Acks < len(subs) {
			short = append(short, m.ID)
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("%d messages were not acked on every subscription, e.g. %v", len(short), short[:min(5, len(short))])
	}
	fmt.Printf("The server confirms: all %d input messages acked on both subscriptions, and\n", inputs)
	for _, sub := range subs {
		topic := outputTopic(sub).String()
		fmt.Printf("  %s holds %d messages\n", topic, perTopic[topic])
		if perTopic[topic] < n {
			return fmt.Errorf("%s holds %d messages, want %d", topic, perTopic[topic], n)
		}
	}
	return nil
}

func counter(res beam.PipelineResult, name string) int64 {
	var total int64
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Key.Namespace == pubsubio.MetricsNamespace && c.Key.Name == name {
			total += c.Result()
		}
	}
	return total
}

func bySubscription(m pubsubio.Message, emit func(string)) { emit(m.Subscription.ID) }

func describe(m pubsubio.Message) string {
	return fmt.Sprintf("%s %s published %s: %s", m.Subscription.ID, m.ID, m.PublishTime.Format(time.RFC3339), m.Data)
}

func less(a, b string) bool { return a < b }

func printCount(sub string, n int) { fmt.Printf("  %s: %d messages\n", sub, n) }

func printSamples(lines []string) {
	sort.Strings(lines)
	fmt.Println("  samples:")
	for _, l := range lines {
		fmt.Println("    " + l)
	}
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
