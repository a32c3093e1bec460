package pubsubio_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"google.golang.org/protobuf/proto"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// TestMain runs the package's pipelines (the examples') on Prism.
func TestMain(m *testing.M) {
	ptest.Main(m)
}

// fakePubSub is an in-process Pub/Sub server for the examples, with the
// topics "orders" and "dead-letters" of project "my-project", the
// subscription "orders-sub" on "orders", and payloads published to it.
type fakePubSub struct {
	srv *pstest.Server
}

func startFakePubSub(payloads ...string) fakePubSub {
	f := newFakePubSub()
	for _, p := range payloads {
		f.srv.Publish("projects/my-project/topics/orders", []byte(p), nil)
	}
	return f
}

// newFakePubSub is startFakePubSub without payloads, its server reacting
// with opts.
func newFakePubSub(opts ...pstest.ServerReactorOption) fakePubSub {
	srv := pstest.NewServer(opts...)
	ctx := context.Background()
	for _, t := range []string{"orders", "dead-letters"} {
		if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/my-project/topics/" + t}); err != nil {
			panic(err)
		}
	}
	if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/my-project/subscriptions/orders-sub", Topic: "projects/my-project/topics/orders", AckDeadlineSeconds: 30,
	}); err != nil {
		panic(err)
	}
	return fakePubSub{srv: srv}
}

// connection points a read or a write at the server. In a real pipeline
// leave Connection unset: application-default credentials, real Pub/Sub.
func (f fakePubSub) connection() pubsubio.Connection {
	return pubsubio.Connection{EmulatorEndpoint: f.srv.Addr}
}

// printTopic prints, sorted, what was published to topic: each payload,
// quoted, with attribute key when the message has it.
func (f fakePubSub) printTopic(topic, key string) {
	var lines []string
	for _, m := range f.srv.Messages() {
		if m.Topic != "projects/my-project/topics/"+topic {
			continue
		}
		line := fmt.Sprintf("%q", m.Data)
		if v, ok := m.Attributes[key]; ok {
			line += fmt.Sprintf(" (%s=%s)", key, v)
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

// printAcked prints how many messages of "orders" were acked.
func (f fakePubSub) printAcked() {
	n := 0
	for _, m := range f.srv.Messages() {
		if m.Topic == "projects/my-project/topics/orders" && m.Acks > 0 {
			n++
		}
	}
	fmt.Println("acked:", n)
}

// exactlyOnceSubscription creates the subscription id on "orders" with
// exactly-once delivery, as an operator would (gcloud pubsub
// subscriptions create ID --topic=orders --enable-exactly-once-delivery),
// and publishes payloads to "orders".
func (f fakePubSub) exactlyOnceSubscription(id string, payloads ...string) {
	if _, err := f.srv.GServer.CreateSubscription(context.Background(), &pubsubpb.Subscription{
		Name: "projects/my-project/subscriptions/" + id, Topic: "projects/my-project/topics/orders",
		AckDeadlineSeconds: 60, EnableExactlyOnceDelivery: true,
	}); err != nil {
		panic(err)
	}
	for _, p := range payloads {
		f.srv.Publish("projects/my-project/topics/orders", []byte(p), nil)
	}
}

// printCounter prints the pubsubio counter name of a pipeline's result.
func printCounter(res beam.PipelineResult, name string) {
	var n int64
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == pubsubio.MetricsNamespace && c.Name() == name {
			n += c.Result()
		}
	}
	fmt.Printf("%s: %d\n", name, n)
}

func (f fakePubSub) close() { f.srv.Close() }

// marshalled is p's portable description as bytes: what a runner, and
// anyone who can view the job, receives.
func marshalled(t *testing.T, p *beam.Pipeline) []byte {
	t.Helper()
	edges, _, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := graphx.Marshal(edges, &graphx.Options{Environment: &pipepb.Environment{Urn: "beam:env:docker:v1"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	// Beam Go base64-encodes a DoFn and its fields into the graph; decode
	// every base64 run, twice for nesting, so the search sees them plain.
	return withBase64Decoded(withBase64Decoded(b))
}

var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{16,}={0,2}`)

// withBase64Decoded is b followed by the decoding of each base64 run in it,
// tried at each of the four alignments a run's first bytes may shift it by.
func withBase64Decoded(b []byte) []byte {
	out := bytes.Clone(b)
	for _, run := range base64Run.FindAll(b, -1) {
		for shift := 0; shift < 4 && shift < len(run); shift++ {
			r := bytes.TrimRight(run[shift:], "=")
			r = r[:len(r)/4*4]
			if d, err := base64.StdEncoding.DecodeString(string(r)); err == nil {
				out = append(out, d...)
			}
		}
	}
	return out
}
