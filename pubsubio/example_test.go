package pubsubio_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

func init() {
	register.Function1x0(printPayload)
	register.Function1x0(printDeadLetter)
	register.Function1x0(printRecord)
	register.Function1x1(toUpper)
}

func printPayload(m pubsubio.Message) { fmt.Println(string(m.Data)) }

func printDeadLetter(f pubsubio.FailedMessage) {
	fmt.Printf("dead letter: %q, stage %s\n", f.Message.Data, f.Stage)
}

func printRecord(r string) { fmt.Println(r) }

func toUpper(m pubsubio.Message) pubsubio.Message {
	m.Data = []byte(strings.ToUpper(string(m.Data)))
	m.Attributes = map[string]string{"from": m.ID}
	return m
}

// Read a subscription and print every message; each is acked once the
// runner has committed the bundle that emitted it.
func ExampleRead() {
	pubsub := startFakePubSub("apple", "banana", "cherry") // stands in for Pub/Sub
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-sub")},
		MaxMessages:   3, // a bounded read, so that the example ends
		Connection:    pubsub.connection(),
	})
	beam.ParDo0(s, printPayload, msgs)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	pubsub.printAcked()
	// Unordered output:
	// apple
	// banana
	// cherry
	// acked: 3
}

// Read and Write: every message read is published to another topic, which
// Write creates when it is missing. A read message is acked only after the
// bundle that published it committed.
func ExampleWrite() {
	pubsub := startFakePubSub("apple", "banana")
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-sub")},
		MaxMessages:   2,
		Connection:    pubsub.connection(),
	})
	pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:      pubsubio.TopicOf("my-project", "shouted"),
		Connection: pubsub.connection(),
	}, beam.ParDo(s, toUpper, msgs))
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	pubsub.printTopic("shouted", "from")
	// Output:
	// "APPLE" (from=m0)
	// "BANANA" (from=m1)
}

// A read that checks its payloads are JSON, and returns those that are
// not as dead letters instead of failing.
func ExampleReadWithDeadLetters() {
	pubsub := startFakePubSub(`{"id": 1}`, "not json", `{"id": 2}`)
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs, deadLetters := pubsubio.ReadWithDeadLetters(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-sub")},
		Format:        pubsubio.FormatJSON,
		DecodePolicy:  pubsubio.DecodeDeadLetter,
		MaxMessages:   3,
		Connection:    pubsub.connection(),
	})
	beam.ParDo0(s, printPayload, msgs)
	beam.ParDo0(s, printDeadLetter, deadLetters)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// {"id": 1}
	// {"id": 2}
	// dead letter: "not json", stage decode
}

// Records turns messages into one-line JSON records; a payload that is not
// JSON is returned as a dead letter.
func ExampleRecords() {
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s,
		pubsubio.Message{ID: "1", Data: []byte(`{"n": 1}`), Attributes: map[string]string{"type": "order"}},
		pubsubio.Message{ID: "2", Data: []byte(`{"n": `)})
	records, deadLetters := pubsubio.Records(s, pubsubio.RecordConfig{Format: pubsubio.FormatJSON}, msgs)
	beam.ParDo0(s, printRecord, records)
	beam.ParDo0(s, printDeadLetter, deadLetters)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// {"data":{"n":1},"__attributes":{"type":"order"},"message_id":"1"}
	// dead letter: "{\"n\": ", stage decode
}

// What Pub/Sub will not take goes to a dead-letter topic, as an envelope
// that says why (package dlq): here a message with neither data nor
// attributes, which Pub/Sub refuses.
func ExampleWriteDeadLetters() {
	pubsub := startFakePubSub()
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s, pubsubio.Message{Data: []byte("fine")}, pubsubio.Message{})
	deadLetters := pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:         pubsubio.TopicOf("my-project", "orders"),
		FailurePolicy: pubsubio.PolicyDeadLetter,
		Connection:    pubsub.connection(),
	}, msgs)
	pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{
		Topic:      pubsubio.TopicOf("my-project", "dead-letters"), // must exist
		Connection: pubsub.connection(),
	}, deadLetters)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	pubsub.printTopic("orders", "")
	pubsub.printTopic("dead-letters", "dlq.stage")
	// Output:
	// "fine"
	// "" (dlq.stage=validate)
}
