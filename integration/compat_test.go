package integration

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
	compat "github.com/pubsubio/beam-pubsubio/pubsubio/io/pubsubio"
)

// The drop-in package (pubsubio/io/pubsubio, Beam's io/pubsubio API) on
// Prism against the emulator; Beam's own example runs on it in
// compat_beam_test.go.

func init() {
	register.Function2x1(describeProto)
	register.Function1x1(protoWithAttributes)
}

// useEmulatorFlag points the drop-in package at e for the rest of the test.
func useEmulatorFlag(t *testing.T, e *emulator.Emulator) {
	t.Helper()
	setFlag(t, "pubsubio_emulator", e.Endpoint)
}

// setFlag sets a flag for the rest of the test.
func setFlag(t *testing.T, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag %q is defined", name)
	}
	prev := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(prev) })
}

// describeProto is "eid batch messageID publishMillis eventMillis" for a
// message read with WithAttributes.
func describeProto(et beam.EventTime, m *pubsubpb.PubsubMessage) string {
	return fmt.Sprintf("%s %s %s %d %d", m.Attributes["eid"], m.Attributes["batch"], m.GetMessageId(), m.GetPublishTime().AsTime().UnixMilli(), et.Milliseconds())
}

// Read of a topic with every option: the read makes a subscription of its
// own, each element is a *pb.PubsubMessage with attributes, message ID and
// publish time, its event time is the timestamp attribute, and what
// carries an ID attribute already seen is dropped. PUBSUB_EMULATOR_HOST
// points at a dead port: the read connects where --pubsubio_emulator says.
func TestDropInReadTopicWithEveryOption(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	useEmulatorFlag(t, e)
	t.Setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
	client := e.Client(t)
	topic := e.CreateTopic(t, "dropin-read")
	p, s := beam.NewPipelineWithRoot()
	msgs := compat.Read(s, e.Project, compat.ReadOptions{Topic: topic.ID, IDAttribute: "eid", TimestampAttribute: "ts", WithAttributes: true})
	bucket := collect.Bucket(t)
	collect.Into(s, bucket, beam.ParDo(s, describeProto, msgs))
	r := runInBackground(p, 3*time.Minute)
	defer r.cancel()
	awaitTopicSubscription(t, client, topic, r)

	const n = 20
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	before := time.Now()
	attrs := func(batch string) func(int) map[string]string {
		return func(i int) map[string]string {
			return map[string]string{"eid": fmt.Sprintf("e%d", i), "batch": batch, "ts": strconv.FormatInt(base+int64(i), 10)}
		}
	}
	ids := e.Publish(t, topic, n, 16, attrs("1"))
	awaitProgress(t, r, bucket, n, time.Minute)
	// The same IDs again: the job runs until Deduplicate has dropped every
	// copy, which only a working deduplication counts.
	e.Publish(t, topic, n, 16, attrs("2"))
	awaitCounter(t, r, topic.ID, "dedup_duplicates", n, time.Minute)
	r.cancel()
	r.wait(t, time.Minute)

	got, err := collect.ItemsOf[string](bucket)
	if err != nil {
		t.Fatal(err)
	}
	byEID := map[string][]string{}
	for _, g := range got {
		f := strings.Fields(g)
		byEID[f[0]] = f
	}
	if len(got) != n || len(byEID) != n {
		t.Fatalf("%d elements with %d distinct IDs, want %d each (the second batch deduplicated away): %v", len(got), len(byEID), n, got)
	}
	for i, id := range ids {
		f := byEID[fmt.Sprintf("e%d", i)]
		published, _ := strconv.ParseInt(f[3], 10, 64)
		if f[1] != "1" || f[2] != id || f[4] != strconv.FormatInt(base+int64(i), 10) || published < before.Add(-time.Minute).UnixMilli() {
			t.Errorf("e%d came out as %v; want batch 1, message ID %s, a publish time after the test started, event time %d", i, f, id, base+int64(i))
		}
	}
}

// protoWithAttributes is payload "i" as a message with attributes and an
// ordering key.
func protoWithAttributes(data []byte) *pubsubpb.PubsubMessage {
	return &pubsubpb.PubsubMessage{Data: data, Attributes: map[string]string{"kind": "proto"}, OrderingKey: "key-" + string(data)}
}

// Write of []byte and of *pb.PubsubMessage, in a batch pipeline (Beam's
// package cannot): every message arrives with its attributes and ordering
// key.
func TestDropInWriteBothElementTypes(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	useEmulatorFlag(t, e)
	client := e.Client(t)
	bytesTopic, protoTopic := e.CreateTopic(t, "dropin-bytes"), e.CreateTopic(t, "dropin-proto")
	bytesSub, protoSub := e.CreateSubscription(t, bytesTopic, "dropin-bytes", 0), e.CreateSubscription(t, protoTopic, "dropin-proto", 0)
	const n = 30
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = []byte(strconv.Itoa(i))
	}
	p, s := beam.NewPipelineWithRoot()
	col := beam.CreateList(s, payloads)
	compat.Write(s, e.Project, bytesTopic.ID, col)
	compat.Write(s, e.Project, protoTopic.ID, beam.ParDo(s, protoWithAttributes, col))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := beamx.Run(ctx, p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	for sub, proto := range map[pubsubio.Subscription]bool{bytesSub: false, protoSub: true} {
		got := receiveAll(t, client, sub, n, time.Minute)
		for data, m := range got {
			wantKey, wantKind := "", ""
			if proto {
				wantKey, wantKind = "key-"+data, "proto"
			}
			if m.OrderingKey != wantKey || m.Attributes["kind"] != wantKind {
				t.Errorf("%s: message %q arrived with ordering key %q and attributes %v; want %q and kind=%q", sub, data, m.OrderingKey, m.Attributes, wantKey, wantKind)
			}
		}
	}
}

// Write to a topic that does not exist fails the job naming it, as Beam's
// writer does, and does not create it.
func TestDropInWriteMissingTopicFails(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	useEmulatorFlag(t, e)
	client := e.Client(t)
	topic := missingTopic(t, e, "dropin-missing")
	p, s := beam.NewPipelineWithRoot()
	compat.Write(s, e.Project, topic.ID, beam.Create(s, []byte("a"), []byte("b")))
	err := runFails(t, p)
	wantInError(t, err, topic.String(), "does not exist")
	_, err = client.TopicAdminClient.GetTopic(context.Background(), &pubsubpb.GetTopicRequest{Topic: topic.String()})
	if status.Code(err) != codes.NotFound {
		t.Errorf("%s after the failed write: %v, want NOT_FOUND (never created)", topic, err)
	}
}
