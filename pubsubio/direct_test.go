package pubsubio_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	//lint:ignore SA1019 the deprecated runner is what this test is about
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Beam's deprecated direct runner runs Write, Records and WriteDeadLetters,
// which are ordinary DoFns: every message reaches its topic, and what
// cannot be published or decoded reaches the dead letters.
func TestWriteRecordsAndDeadLettersOnTheDirectRunner(t *testing.T) {
	// "bad" is rejected on orders only: its dead letter carries it too.
	pubsub := newFakePubSub(pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactorFunc(func(req any) (bool, any, error) {
		r := req.(*pubsubpb.PublishRequest)
		for _, m := range r.GetMessages() {
			if r.GetTopic() == "projects/my-project/topics/orders" && string(m.GetData()) == "bad" {
				return true, nil, status.Error(codes.InvalidArgument, "Invalid message")
			}
		}
		return false, nil, nil
	})})
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := beam.CreateList(s, []pubsubio.Message{
		{Data: []byte(`{"n":1}`)},
		{Data: []byte(`{"n":2}`)},
		{Data: []byte("bad")}, // rejected by the server, alone: a dead letter
		{Data: []byte(`{"n":`)},
	})
	rejected := pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:         pubsubio.TopicOf("my-project", "orders"),
		FailurePolicy: pubsubio.PolicyDeadLetter,
		Connection:    pubsub.connection(),
	}, msgs)
	records, undecodable := pubsubio.Records(s, pubsubio.RecordConfig{Format: pubsubio.FormatJSON}, msgs)
	passert.Count(s, records, "records", 2)
	pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{
		Topic:      pubsubio.TopicOf("my-project", "dead-letters"),
		Connection: pubsub.connection(),
	}, beam.Flatten(s, rejected, undecodable))
	if _, err := direct.Execute(context.Background(), p); err != nil {
		t.Fatalf("on the direct runner: %v", err)
	}

	var orders, deadLetters []string
	for _, m := range pubsub.srv.Messages() {
		switch m.Topic {
		case "projects/my-project/topics/orders":
			orders = append(orders, string(m.Data))
		case "projects/my-project/topics/dead-letters":
			deadLetters = append(deadLetters, string(m.Data)+" "+m.Attributes["dlq.stage"])
		}
	}
	slices.Sort(orders)
	slices.Sort(deadLetters)
	if got := strings.Join(orders, ", "); got != `{"n":, {"n":1}, {"n":2}` {
		t.Errorf("published to orders: %s", got)
	}
	if got := strings.Join(deadLetters, ", "); got != `bad decode, bad publish, {"n": decode` {
		t.Errorf("dead letters: %s", got)
	}
}
