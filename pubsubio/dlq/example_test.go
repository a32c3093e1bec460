package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// A consumer of a dead-letter topic turns each message back into the
// dead letter it carries.
func ExampleDecode() {
	failed := dlq.New(dlq.StageDecode, model.Message{ID: "4711", Data: []byte("{oops")},
		errors.New("the payload is not JSON"), 1, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	failed.Subscription = model.SubscriptionOf("my-project", "orders-sub")

	envelope := dlq.Encode(failed, model.TopicOf("my-project", "dead-letters")) // what Write publishes
	back, err := dlq.Decode(model.Message{Data: envelope.Data, Attributes: envelope.Attributes})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.Stage, back.Subscription, back.Message.ID, string(back.Message.Data))
	fmt.Println(back.Error)
	// Output:
	// decode projects/my-project/subscriptions/orders-sub 4711 {oops
	// the payload is not JSON
}

// Write publishes dead letters to a topic that must exist, one envelope
// each.
func ExampleWrite() {
	srv := pstest.NewServer() // stands in for Pub/Sub
	defer srv.Close()
	topic := model.TopicOf("my-project", "dead-letters")
	if _, err := srv.GServer.CreateTopic(context.Background(), &pubsubpb.Topic{Name: topic.String()}); err != nil {
		fmt.Println(err)
		return
	}

	p, s := beam.NewPipelineWithRoot()
	failed := beam.Create(s, dlq.New(dlq.StageValidate, model.Message{Data: []byte("too big, say")},
		errors.New("over the size limit"), 0, time.Now()))
	dlq.Write(s, dlq.Config{
		Topic:      topic,
		Connection: connection.Settings{EmulatorEndpoint: srv.Addr}, // leave unset for Pub/Sub
	}, failed)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	for _, m := range srv.Messages() {
		fmt.Println(string(m.Data), m.Attributes[dlq.AttrStage], m.Attributes[dlq.AttrError])
	}
	// Output:
	// too big, say validate over the size limit
}
