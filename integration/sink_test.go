package integration

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Sink tests: pipelines on Prism (in-process) writing through
// pubsubio.Write, against pstest where faults are injected and against the
// emulator for everything else. What arrived is read back with the client,
// under deadlines that report what did arrive.

func init() {
	register.DoFn1x1[pubsubio.Message, pubsubio.Message](&routeFn{})
	register.DoFn2x0[pubsubio.Message, func(pubsubio.Message)](&bundleProbeFn{})
	register.Emitter1[pubsubio.Message]()
}

// routeFn sends message i (its payload starts with the decimal i) to
// Topics[i % len(Topics)]: dynamic destinations.
type routeFn struct {
	Topics []pubsubio.Topic
}

func (f *routeFn) ProcessElement(m pubsubio.Message) pubsubio.Message {
	i, _ := strconv.Atoi(strings.TrimRight(string(m.Data), "."))
	m.Topic = f.Topics[i%len(f.Topics)]
	return m
}

// bundleProbeFn passes messages through and counts, per Name, the bundles
// it starts in this process (Prism runs in-process). Fused with the writer,
// its count is the writer's.
type bundleProbeFn struct {
	Name string
}

var probeBundles sync.Map // name -> *atomic.Int64

func (f *bundleProbeFn) StartBundle(_ func(pubsubio.Message)) {
	n, _ := probeBundles.LoadOrStore(f.Name, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

func (f *bundleProbeFn) ProcessElement(m pubsubio.Message, emit func(pubsubio.Message)) { emit(m) }

func bundlesSeen(name string) int64 {
	n, ok := probeBundles.Load(name)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// A publish answered NOT_FOUND, then success: the sink repairs (the topic
// exists, creation answers ALREADY_EXISTS) and every message arrives once.
func TestSinkPstestNotFoundThenSuccess(t *testing.T) {
	t.Parallel()
	var publishes atomic.Int64
	e, srv := emulator.Fake(t, pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactorFunc(func(any) (bool, any, error) {
		if publishes.Add(1) == 1 {
			return true, nil, status.Error(codes.NotFound, "topic not found")
		}
		return false, nil, nil
	})})
	topic := e.CreateTopic(t, "sink-notfound")
	const n = 200
	p, dead := writePipeline(t, pubsubio.WriteConfig{Topic: topic, Connection: pubsubio.Connection{EmulatorEndpoint: e.Endpoint}}, sinkMessages(n, 32, nil), nil)
	r, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	counts := map[string]int{}
	for _, m := range srv.Messages() {
		counts[string(m.Data)]++
	}
	for i := range n {
		if c := counts[string(emulator.Payload(i, 32))]; c != 1 {
			t.Errorf("message %d arrived %d times, want once", i, c)
		}
	}
	if collect.Len(dead) != 0 {
		t.Errorf("%d dead letters: %s", collect.Len(dead), collect.Sample(dead, 5))
	}
	if publishes.Load() < 2 || counter(r, "topics_created") != 1 || counter(r, "publish_errors_NOT_FOUND") != 1 {
		t.Errorf("publish requests %d, topics_created %d, NOT_FOUND errors %d; want a repair after one NOT_FOUND",
			publishes.Load(), counter(r, "topics_created"), counter(r, "publish_errors_NOT_FOUND"))
	}
	t.Logf("records_sent %d, publish requests %d", counter(r, "records_sent"), publishes.Load())
}

// INVALID_ARGUMENT for one message in a batch: the others are published and
// exactly that one is dead-lettered.
func TestSinkPstestInvalidArgumentForOneMessage(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t, pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactorFunc(func(req any) (bool, any, error) {
		for _, m := range req.(*pubsubpb.PublishRequest).GetMessages() {
			if m.GetAttributes()["poison"] != "" {
				return true, nil, status.Error(codes.InvalidArgument, "Invalid attribute value")
			}
		}
		return false, nil, nil
	})})
	topic := e.CreateTopic(t, "sink-invalid")
	const n, bad = 100, 37
	msgs := sinkMessages(n, 16, func(i int, m *pubsubio.Message) {
		if i == bad {
			m.Attributes = map[string]string{"poison": "yes"}
		}
	})
	p, dead := writePipeline(t, pubsubio.WriteConfig{
		Topic:         topic,
		FailurePolicy: pubsubio.PolicyDeadLetter,
		// Everything in one batch: the rejection has to be isolated.
		Publisher:  pubsubio.PublisherOptions{CountThreshold: 1000, DelayThreshold: time.Hour},
		Connection: pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, msgs, nil)
	r, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	published := map[string]bool{}
	for _, m := range srv.Messages() {
		published[string(m.Data)] = true
	}
	for i := range n {
		if got := published[string(emulator.Payload(i, 16))]; got == (i == bad) {
			t.Errorf("message %d published: %v", i, got)
		}
	}
	letters, err := collect.ItemsOf[pubsubio.FailedMessage](dead)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || string(letters[0].Message.Data) != string(emulator.Payload(bad, 16)) ||
		letters[0].Stage != pubsubio.StagePublish || letters[0].Code != "INVALID_ARGUMENT" || letters[0].Topic != topic {
		t.Fatalf("dead letters %+v, want exactly message %d, stage publish, INVALID_ARGUMENT", letters, bad)
	}
	if got := counter(r, "publish_errors_INVALID_ARGUMENT"); got != 1 {
		t.Errorf("publish_errors_INVALID_ARGUMENT %d, want 1: one confirmed rejection, no batch fan-out", got)
	}
	if got := counter(r, "records_sent"); got != n-1 {
		t.Errorf("records_sent %d, want %d", got, n-1)
	}
}

// UNAVAILABLE on every publish fails the pipeline, naming Pub/Sub's status,
// even under a dropping policy.
func TestSinkPstestUnavailableFailsThePipeline(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t, pstest.WithErrorInjection("Publish", codes.Unavailable, "backend unavailable"))
	topic := e.CreateTopic(t, "sink-unavailable")
	p, dead := writePipeline(t, pubsubio.WriteConfig{
		Topic:         topic,
		FailurePolicy: pubsubio.PolicyDrop,
		Publisher:     pubsubio.PublisherOptions{Timeout: 2 * time.Second, RetryInitialBackoff: 10 * time.Millisecond, RetryMaxBackoff: 200 * time.Millisecond},
		Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, sinkMessages(10, 16, nil), nil)
	err := beamx.Run(context.Background(), p)
	if err == nil {
		t.Fatal("the pipeline succeeded against a Pub/Sub that answers UNAVAILABLE")
	}
	if s := err.Error(); !strings.Contains(s, "pubsubio.Write") || !(strings.Contains(s, "UNAVAILABLE") || strings.Contains(s, "DEADLINE_EXCEEDED")) {
		t.Errorf("the failure does not name the sink and the status: %v", err)
	}
	if n := len(srv.Messages()); n != 0 || collect.Len(dead) != 0 {
		t.Errorf("%d messages published, %d dead letters", n, collect.Len(dead))
	}
}

// Dynamic destinations on the emulator: messages fan out to two existing
// topics and two the sink creates, every create option is on the created
// topics, and attributes and ordering keys arrive.
func TestSinkDynamicDestinationsWithAutoCreation(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	client := e.Client(t)
	existing := []pubsubio.Topic{e.CreateTopic(t, "sink-dyn-a"), e.CreateTopic(t, "sink-dyn-b")}
	subs := []pubsubio.Subscription{e.CreateSubscription(t, existing[0], "sink-dyn-a", 0), e.CreateSubscription(t, existing[1], "sink-dyn-b", 0)}
	created := []pubsubio.Topic{missingTopic(t, e, "sink-auto-c"), missingTopic(t, e, "sink-auto-d")}
	topics := []pubsubio.Topic{existing[0], existing[1], created[0], created[1]}
	opts := pubsubio.TopicCreateOptions{
		MessageRetention:          24 * time.Hour,
		KMSKeyName:                "projects/" + e.Project + "/locations/europe-west1/keyRings/ring/cryptoKeys/key",
		AllowedPersistenceRegions: []string{"europe-west1", "europe-west4"},
		EnforceInTransit:          true,
	}
	const n = 400
	msgs := sinkMessages(n, 64, func(i int, m *pubsubio.Message) {
		m.Attributes = map[string]string{"index": strconv.Itoa(i), "parity": strconv.Itoa(i % 2)}
		m.OrderingKey = fmt.Sprintf("key-%d", i%5)
	})
	p, dead := writePipeline(t, pubsubio.WriteConfig{
		TopicCreate: opts,
		Publisher:   pubsubio.PublisherOptions{EnableMessageOrdering: true},
		Connection:  pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, msgs, func(s beam.Scope, col beam.PCollection) beam.PCollection {
		return beam.ParDo(s, &routeFn{Topics: topics}, col)
	})
	r, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	if collect.Len(dead) != 0 {
		t.Fatalf("dead letters: %s", collect.Sample(dead, 5))
	}
	if got := counter(r, "records_sent"); got != n {
		t.Errorf("records_sent %d, want %d (Pub/Sub confirmed every message, to all four topics)", got, n)
	}
	if got := counter(r, "topics_created"); got < 2 {
		t.Errorf("topics_created %d, want at least one repair per created topic", got)
	}
	for i, sub := range subs {
		got := receiveAll(t, client, sub, n/4, time.Minute)
		for j := i; j < n; j += 4 {
			m := got[string(emulator.Payload(j, 64))]
			if m == nil {
				t.Errorf("%s: message %d missing", sub, j)
				continue
			}
			if want := map[string]string{"index": strconv.Itoa(j), "parity": strconv.Itoa(j % 2)}; !reflect.DeepEqual(m.Attributes, want) {
				t.Errorf("message %d: attributes %v, want %v", j, m.Attributes, want)
			}
			if want := fmt.Sprintf("key-%d", j%5); m.OrderingKey != want {
				t.Errorf("message %d: ordering key %q, want %q", j, m.OrderingKey, want)
			}
		}
		if len(got) != n/4 {
			t.Errorf("%s: %d distinct messages, want %d", sub, len(got), n/4)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range created {
		got, err := client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topic.String()})
		if err != nil {
			t.Fatalf("the sink did not create %s: %v", topic, err)
		}
		if got.GetMessageRetentionDuration().AsDuration() != opts.MessageRetention || got.GetKmsKeyName() != opts.KMSKeyName ||
			!reflect.DeepEqual(got.GetMessageStoragePolicy().GetAllowedPersistenceRegions(), opts.AllowedPersistenceRegions) ||
			got.GetMessageStoragePolicy().GetEnforceInTransit() != opts.EnforceInTransit {
			t.Errorf("%s was created as %v, want the create options %+v", topic, got, opts)
		}
	}
}

// Read -> Write on the emulator with batching thresholds no bundle reaches:
// only each bundle's end-of-bundle flush can deliver, over many bundles of
// one fused stage, and every message read arrives on the output topic.
func TestSinkReadToWriteDeliversEveryMessageThroughBundleFlushes(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	client := e.Client(t)
	in := e.CreateTopic(t, "sink-rw-in")
	inSub := e.CreateSubscription(t, in, "sink-rw-in", 30*time.Second)
	out := e.CreateTopic(t, "sink-rw-out")
	outSub := e.CreateSubscription(t, out, "sink-rw-out", 0)
	const n = 2000
	e.Publish(t, in, n, 128, func(i int) map[string]string { return map[string]string{"i": strconv.Itoa(i)} })

	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	probe := t.Name()
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{inSub}, MaxMessages: n, IdleTimeout: 10 * time.Second, Connection: conn})
	msgs = beam.ParDo(s, &bundleProbeFn{Name: probe}, msgs)
	dead := pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:      out,
		Publisher:  pubsubio.PublisherOptions{CountThreshold: 1000, ByteThreshold: 9e6, DelayThreshold: time.Hour},
		Connection: conn,
	}, msgs)
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, dead)
	start := time.Now()
	r, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	took := time.Since(start)
	got := receiveAll(t, client, outSub, n, 2*time.Minute)
	for i := range n {
		m := got[string(emulator.Payload(i, 128))]
		if m == nil {
			t.Errorf("message %d never arrived on the output topic", i)
		} else if m.Attributes["i"] != strconv.Itoa(i) {
			t.Errorf("message %d: attributes %v", i, m.Attributes)
		}
	}
	bundles := bundlesSeen(probe)
	if bundles < 2 {
		t.Errorf("the writer's stage ran %d bundles; the test needs several to show repeated bundle-end flushes", bundles)
	}
	if collect.Len(bucket) != 0 {
		t.Errorf("dead letters: %s", collect.Sample(bucket, 5))
	}
	t.Logf("%d messages read and written in %v over %d bundles; records_sent %d", n, took.Round(time.Millisecond), bundles, counter(r, "records_sent"))
}

// MessagesFromStrings and MessagesFromBytes feed Write from plain
// PCollections: each element becomes one message's payload.
func TestSinkFromStringsAndBytes(t *testing.T) {
	t.Parallel()
	e, srv := emulator.Fake(t)
	topic := e.CreateTopic(t, "sink-plain")
	p, s := beam.NewPipelineWithRoot()
	cfg := pubsubio.WriteConfig{Topic: topic, Connection: pubsubio.Connection{EmulatorEndpoint: e.Endpoint}}
	pubsubio.Write(s, cfg, pubsubio.MessagesFromStrings(s, beam.Create(s, "s1", "s2")))
	pubsubio.Write(s, cfg, pubsubio.MessagesFromBytes(s, beam.Create(s, []byte("b1"), []byte("b2"))))
	if err := beamx.Run(context.Background(), p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	var got []string
	for _, m := range srv.Messages() {
		got = append(got, string(m.Data))
	}
	sort.Strings(got)
	if want := []string{"b1", "b2", "s1", "s2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
}
