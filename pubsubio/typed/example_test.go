package typed_test

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Order is an example's element type. A named element type must be
// registered, so that every worker knows it.
type Order struct {
	ID    string  `json:"id" avro:"id"`
	Total float64 `json:"total" avro:"total"`
}

func init() {
	beam.RegisterType(reflect.TypeOf((*Order)(nil)).Elem())
	register.Function1x0(printOrder)
	register.Function1x0(printFailure)
	register.Function1x0(printMessage)
}

func printOrder(o Order) { fmt.Printf("order %s: %.2f\n", o.ID, o.Total) }

func printFailure(f pubsubio.FailedMessage) {
	fmt.Printf("dead letter: message %s, stage %s\n", f.Message.ID, f.Stage)
}

func printMessage(m pubsubio.Message) { fmt.Printf("% x\n", m.Data) }

// Decode JSON payloads into a struct; a payload that is not an Order goes
// to the dead letters. In a pipeline the messages come from pubsubio.Read.
func ExampleDecode() {
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s,
		pubsubio.Message{ID: "1", Data: []byte(`{"id":"a-1","total":12.5}`)},
		pubsubio.Message{ID: "2", Data: []byte(`{"id":"a-2","total":"lots"}`)})
	orders, deadLetters := pubsubio.Decode(s, pubsubio.DecodeConfig{
		Format:       pubsubio.FormatJSON,
		DecodePolicy: pubsubio.DecodeDeadLetter,
	}, reflect.TypeOf(Order{}), msgs)
	beam.ParDo0(s, printOrder, orders)
	beam.ParDo0(s, printFailure, deadLetters)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// order a-1: 12.50
	// dead letter: message 2, stage decode
}

// Encode structs as binary Avro records for pubsubio.Write: the string's
// length and bytes, then the double.
func ExampleEncode() {
	p, s := beam.NewPipelineWithRoot()
	orders := beam.Create(s, Order{ID: "a-1", Total: 12.5}, Order{ID: "a-2", Total: 3})
	msgs, _ := pubsubio.Encode(s, pubsubio.EncodeConfig{
		Format:     pubsubio.FormatAvro,
		AvroSchema: `{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}, {"name": "total", "type": "double"}]}`,
	}, orders)
	beam.ParDo0(s, printMessage, msgs)
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// 06 61 2d 31 00 00 00 00 00 00 29 40
	// 06 61 2d 32 00 00 00 00 00 00 08 40
}
