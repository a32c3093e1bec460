package pubsubio_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

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

func (f fakePubSub) close() { f.srv.Close() }
