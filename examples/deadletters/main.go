// Deadletters reads two Pub/Sub subscriptions of JSON events with pubsubio
// on Prism, writes each good event to a topic per event type through the
// sink, and sends every failure, the payloads that are not JSON (decode)
// and the events Pub/Sub would not take (validate, publish), to one
// dead-letter topic with pubsubio.WriteDeadLetters. Nothing is dropped and
// no bundle fails on a poison message: every message read ends on an output
// topic or on the dead-letter topic, and the example reads both back to
// show it.
//
// With no flags it needs nothing installed: it starts an in-process Pub/Sub
// server (pstest), creates the input topics and subscriptions, the per-type
// output topics and the dead-letter topic (each with a subscription to read
// back from), and publishes sample events, a few of them poison.
//
//	go run ./examples/deadletters
//	go run ./examples/deadletters --emulator=localhost:8085
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
)

var (
	emulator = flag.String("emulator", "", "host:port of a running Pub/Sub emulator; the example creates its own topics and subscriptions there")
	messages = flag.Int("messages", 100, "how many sample events to publish to each input topic")
	idle     = flag.Duration("idle", 5*time.Second, "finish once nothing has arrived for this long")
	readBack = flag.Duration("readback", time.Minute, "how long to wait for the outputs to be read back")
)

const project = "deadletters-project"

// The sample: events of these types; every notJSONEvery-th payload is not
// JSON, and every hugeNoteEvery-th event carries a note too long for the
// attribute it is routed with, so Pub/Sub would reject it.
var (
	inputs        = []string{"shop", "billing"}
	eventTypes    = []string{"order", "refund"}
	notJSONEvery  = 10
	hugeNoteEvery = 25
)

func init() {
	register.DoFn2x0[pubsubio.Message, func(pubsubio.Message)](&routeFn{})
	register.Emitter1[pubsubio.Message]()
}

func main() {
	flag.Parse()
	beam.Init()
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "deadletters:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
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
		return fmt.Errorf("connecting to %s: %w", endpoint, err)
	}
	defer client.Close()
	env, err := setUp(ctx, client, *messages)
	if err != nil {
		return err
	}

	p, s := beam.NewPipelineWithRoot()
	// Payloads that are not JSON come out on the read's dead-letter output
	// instead of failing the bundle.
	msgs, undecodable := pubsubio.ReadWithDeadLetters(s, pubsubio.ReadConfig{
		Subscriptions: env.subscriptions,
		Format:        pubsubio.FormatJSON,
		DecodePolicy:  pubsubio.DecodeDeadLetter,
		MaxMessages:   int64(*messages),
		IdleTimeout:   *idle,
		Connection:    conn,
	})
	// One output topic per event type (dynamic destinations); an event
	// Pub/Sub would not take comes back as a dead letter.
	rejected := pubsubio.Write(s, pubsubio.WriteConfig{
		FailurePolicy: pubsubio.PolicyDeadLetter,
		Connection:    conn,
	}, beam.ParDo(s, &routeFn{Suffix: env.suffix}, msgs))
	pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{Topic: env.deadLetters, Connection: conn}, beam.Flatten(s, undecodable, rejected))

	res, err := beamx.RunWithMetrics(ctx, p)
	if err != nil {
		return fmt.Errorf("pipeline failed: %w", err)
	}
	fmt.Printf("Read %d events (%d did not decode), published %d, dead-lettered %d.\n",
		counter(res, "messages_emitted"), counter(res, "decode_failures"),
		counter(res, "records_sent"), counter(res, "dead_letters_published"))
	return env.readBack(ctx, client, *readBack)
}

// routeFn sends an event to the topic of its type, with its note as an
// attribute so subscriptions can filter on it. Suffix keeps this run's
// topics apart from earlier runs' on a shared emulator.
type routeFn struct {
	Suffix string
}

func (fn *routeFn) ProcessElement(m pubsubio.Message, emit func(pubsubio.Message)) {
	var e struct {
		Type string `json:"type"`
		Note string `json:"note"`
	}
	_ = json.Unmarshal(m.Data, &e) // the read let only JSON through; a missing field routes to "unknown"
	if e.Type == "" {
		e.Type = "unknown"
	}
	attrs := map[string]string{"source_subscription": m.Subscription.ID, "source_message_id": m.ID}
	if e.Note != "" {
		attrs["note"] = e.Note
	}
	emit(pubsubio.Message{Data: m.Data, Attributes: attrs, Topic: outputTopic(e.Type, fn.Suffix)})
}

func outputTopic(eventType, suffix string) pubsubio.Topic {
	return pubsubio.TopicOf(project, "events-"+eventType+"-"+suffix)
}

// environment is what setUp created and what should come out.
type environment struct {
	subscriptions []pubsubio.Subscription
	deadLetters   pubsubio.Topic
	suffix        string
	// readBack subscription -> how many messages it should receive.
	want map[string]int
}

// setUp creates the inputs, the outputs with a subscription each, and
// publishes n events to each input.
func setUp(ctx context.Context, client *pubsub.Client, n int) (*environment, error) {
	suffix := strings.ReplaceAll(time.Now().Format("150405.000"), ".", "-")
	env := &environment{want: map[string]int{}, deadLetters: pubsubio.TopicOf(project, "dead-letters-"+suffix), suffix: suffix}
	topicWithSub := func(topic, sub string) error {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
			return fmt.Errorf("creating %s: %w", topic, err)
		}
		if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 30}); err != nil {
			return fmt.Errorf("creating %s: %w", sub, err)
		}
		return nil
	}
	// The outputs exist beforehand only so that the example can read them
	// back; the sink would create a missing one. The dead-letter topic must
	// exist: WriteDeadLetters never creates it.
	for _, t := range eventTypes {
		topic := outputTopic(t, suffix)
		if err := topicWithSub(topic.String(), readBackSub(topic.ID)); err != nil {
			return nil, err
		}
	}
	if err := topicWithSub(env.deadLetters.String(), readBackSub(env.deadLetters.ID)); err != nil {
		return nil, err
	}
	for _, in := range inputs {
		topic := pubsubio.TopicOf(project, in+"-"+suffix)
		sub := pubsubio.SubscriptionOf(project, in+"-"+suffix+"-read")
		if err := topicWithSub(topic.String(), sub.String()); err != nil {
			return nil, err
		}
		env.subscriptions = append(env.subscriptions, sub)
		pub := client.Publisher(topic.String())
		results := make([]*pubsub.PublishResult, n)
		for i := range results {
			t := eventTypes[i%len(eventTypes)]
			data := fmt.Appendf(nil, `{"type": %q, "id": %d, "amount": %d}`, t, i, 10+i%90)
			switch {
			case i%notJSONEvery == notJSONEvery-1:
				data = fmt.Appendf(nil, "type=%s id=%d (not JSON)", t, i)
				env.want[readBackSub(env.deadLetters.ID)]++
			case i%hugeNoteEvery == hugeNoteEvery-1:
				data = fmt.Appendf(nil, `{"type": %q, "id": %d, "note": %q}`, t, i, strings.Repeat("n", 2000))
				env.want[readBackSub(env.deadLetters.ID)]++
			default:
				env.want[readBackSub(outputTopic(t, suffix).ID)]++
			}
			results[i] = pub.Publish(ctx, &pubsub.Message{Data: data})
		}
		for _, r := range results {
			if _, err := r.Get(ctx); err != nil {
				pub.Stop()
				return nil, fmt.Errorf("publishing to %s: %w", topic, err)
			}
		}
		pub.Stop()
	}
	fmt.Printf("Published %d events to each of %d topics, read through %v.\n", n, len(inputs), env.subscriptions)
	return env, nil
}

func readBackSub(topicID string) string {
	return fmt.Sprintf("projects/%s/subscriptions/%s-readback", project, topicID)
}

// readBack pulls every output subscription until it received what it
// should, bounded by timeout, and prints the counts; dead letters are
// decoded and counted by stage.
func (env *environment) readBack(ctx context.Context, client *pubsub.Client, timeout time.Duration) error {
	subs := make([]string, 0, len(env.want))
	for s := range env.want {
		subs = append(subs, s)
	}
	sort.Strings(subs)
	fmt.Println("Read back:")
	var short []string
	for _, sub := range subs {
		want := env.want[sub]
		stages := map[string]int{}
		got := receive(ctx, client, sub, want, timeout, func(m *pubsub.Message) {
			if f, err := dlq.Decode(pubsubio.Message{Data: m.Data, Attributes: m.Attributes}); err == nil {
				stages[string(f.Stage)]++
			}
		})
		line := fmt.Sprintf("  %s: %d of %d messages", sub, got, want)
		if len(stages) > 0 {
			line += fmt.Sprintf(" (dead letters by stage: %v)", stages)
		}
		fmt.Println(line)
		if got < want {
			short = append(short, sub)
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("%v received fewer messages than published within %v; rerun with a longer --readback, or check the pipeline's log", short, timeout)
	}
	return nil
}

// receive acks and counts distinct messages on sub until want arrived or
// timeout passed, calling each for every distinct message.
func receive(ctx context.Context, client *pubsub.Client, sub string, want int, timeout time.Duration, each func(*pubsub.Message)) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]bool{}
	_ = client.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		if seen[m.ID] {
			return
		}
		seen[m.ID] = true
		each(m)
		if len(seen) >= want {
			cancel()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	return len(seen)
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
