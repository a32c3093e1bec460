package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/linkedin/goavro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// The typed case's values and DoFns: generators, the hand-written
// decoders and encoders the typed transforms are compared with, and
// counters. Every format carries the same record: what a Pub/Sub message
// holds.

// typedEvent is the record as a Go struct, for JSON and Avro.
type typedEvent struct {
	MessageID   string            `json:"message_id" avro:"message_id"`
	Data        []byte            `json:"data" avro:"data"`
	Attributes  map[string]string `json:"attributes" avro:"attributes"`
	OrderingKey string            `json:"ordering_key" avro:"ordering_key"`
	PublishTime int64             `json:"publish_time" avro:"publish_time"`
}

const typedEventSchema = `{"type": "record", "name": "Event", "fields": [
  {"name": "message_id", "type": "string"}, {"name": "data", "type": "bytes"},
  {"name": "attributes", "type": {"type": "map", "values": "string"}},
  {"name": "ordering_key", "type": "string"}, {"name": "publish_time", "type": "long"}]}`

// typedSamples is how many distinct records the generators cycle through.
const typedSamples = 100

func typedSample(i int) typedEvent {
	return typedEvent{
		MessageID: fmt.Sprintf("%016d", 1e15+i), Data: []byte(strings.Repeat(fmt.Sprintf("payload-%03d ", i), 16)),
		Attributes:  map[string]string{"source": "bench", "kind": []string{"order", "refund"}[i%2], "shard": fmt.Sprint(i % 7)},
		OrderingKey: fmt.Sprintf("key-%d", i%10), PublishTime: 1716700000000 + int64(i),
	}
}

func typedProto(e typedEvent) *pubsubpb.PubsubMessage {
	return &pubsubpb.PubsubMessage{MessageId: e.MessageID, Data: e.Data, Attributes: e.Attributes, OrderingKey: e.OrderingKey, PublishTime: timestamppb.New(time.UnixMilli(e.PublishTime))}
}

func init() {
	beam.RegisterType(reflect.TypeOf((*typedEvent)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*pubsubpb.PubsubMessage)(nil)).Elem())
	register.DoFn2x1[[]byte, func(pubsubio.Message), error](&genPayloadsFn{})
	register.DoFn2x0[[]byte, func(typedEvent)](&genEventsFn{})
	register.DoFn2x0[[]byte, func(*pubsubpb.PubsubMessage)](&genProtosFn{})
	register.DoFn2x1[pubsubio.Message, func(typedEvent), error](&handDecodeFn{})
	register.DoFn2x1[pubsubio.Message, func(*pubsubpb.PubsubMessage), error](&handProtoDecodeFn{})
	register.DoFn2x1[typedEvent, func(pubsubio.Message), error](&handEncodeFn{})
	register.DoFn2x1[*pubsubpb.PubsubMessage, func(pubsubio.Message), error](&handProtoEncodeFn{})
	register.DoFn2x0[typedEvent, func(int)](&countEventsFn{})
	register.DoFn2x0[*pubsubpb.PubsubMessage, func(int)](&countProtosFn{})
	register.Emitter1[typedEvent]()
	register.Emitter1[*pubsubpb.PubsubMessage]()
}

// genPayloadsFn emits N messages holding the samples in Format.
type genPayloadsFn struct {
	Format string
	N      int
}

func (f *genPayloadsFn) ProcessElement(_ []byte, emit func(pubsubio.Message)) error {
	enc := handEncodeFn{Format: f.Format}
	if err := enc.Setup(); err != nil {
		return err
	}
	payloads := make([][]byte, typedSamples)
	for i := range payloads {
		var err error
		if f.Format == "PROTOBUF" {
			payloads[i], err = proto.Marshal(typedProto(typedSample(i)))
		} else {
			payloads[i], err = enc.encode(typedSample(i))
		}
		if err != nil {
			return err
		}
	}
	for i := range f.N {
		emit(pubsubio.Message{ID: "m", Data: payloads[i%typedSamples]})
	}
	return nil
}

// genEventsFn and genProtosFn emit N records.
type genEventsFn struct{ N int }

func (f *genEventsFn) ProcessElement(_ []byte, emit func(typedEvent)) {
	for i := range f.N {
		emit(typedSample(i % typedSamples))
	}
}

type genProtosFn struct{ N int }

func (f *genProtosFn) ProcessElement(_ []byte, emit func(*pubsubpb.PubsubMessage)) {
	samples := make([]*pubsubpb.PubsubMessage, typedSamples)
	for i := range samples {
		samples[i] = typedProto(typedSample(i))
	}
	for i := range f.N {
		emit(samples[i%typedSamples])
	}
}

// handDecodeFn is what a user writes without package typed: JSON with
// encoding/json, binary Avro with goavro and a field-by-field copy.
type handDecodeFn struct {
	Format string
	avro   *goavro.Codec
}

func (f *handDecodeFn) Setup() (err error) {
	f.avro, err = goavro.NewCodec(typedEventSchema)
	return err
}

func (f *handDecodeFn) ProcessElement(m pubsubio.Message, emit func(typedEvent)) error {
	var e typedEvent
	if f.Format == "JSON" {
		if err := json.Unmarshal(m.Data, &e); err != nil {
			return err
		}
		emit(e)
		return nil
	}
	native, _, err := f.avro.NativeFromBinary(m.Data)
	if err != nil {
		return err
	}
	rec := native.(map[string]any)
	e.MessageID, _ = rec["message_id"].(string)
	data, _ := rec["data"].([]byte)
	e.Data = append([]byte(nil), data...)
	attrs, _ := rec["attributes"].(map[string]any)
	e.Attributes = make(map[string]string, len(attrs))
	for k, v := range attrs {
		e.Attributes[k], _ = v.(string)
	}
	e.OrderingKey, _ = rec["ordering_key"].(string)
	e.PublishTime, _ = rec["publish_time"].(int64)
	emit(e)
	return nil
}

// handProtoDecodeFn unmarshals binary Protocol Buffers.
type handProtoDecodeFn struct{}

func (f *handProtoDecodeFn) ProcessElement(m pubsubio.Message, emit func(*pubsubpb.PubsubMessage)) error {
	p := new(pubsubpb.PubsubMessage)
	if err := proto.Unmarshal(m.Data, p); err != nil {
		return err
	}
	emit(p)
	return nil
}

// handEncodeFn is the hand-written encoder: encoding/json, or goavro from
// a map built field by field.
type handEncodeFn struct {
	Format string
	avro   *goavro.Codec
}

func (f *handEncodeFn) Setup() (err error) {
	f.avro, err = goavro.NewCodec(typedEventSchema)
	return err
}

func (f *handEncodeFn) encode(e typedEvent) ([]byte, error) {
	if f.Format == "JSON" {
		return json.Marshal(e)
	}
	attrs := make(map[string]any, len(e.Attributes))
	for k, v := range e.Attributes {
		attrs[k] = v
	}
	return f.avro.BinaryFromNative(nil, map[string]any{
		"message_id": e.MessageID, "data": e.Data, "attributes": attrs, "ordering_key": e.OrderingKey, "publish_time": e.PublishTime,
	})
}

func (f *handEncodeFn) ProcessElement(e typedEvent, emit func(pubsubio.Message)) error {
	data, err := f.encode(e)
	if err != nil {
		return err
	}
	emit(pubsubio.Message{Data: data})
	return nil
}

type handProtoEncodeFn struct{}

func (f *handProtoEncodeFn) ProcessElement(p *pubsubpb.PubsubMessage, emit func(pubsubio.Message)) error {
	data, err := proto.Marshal(p)
	if err != nil {
		return err
	}
	emit(pubsubio.Message{Data: data})
	return nil
}

// countEventsFn and countProtosFn count what a decoder emitted, as
// countMessagesFn counts messages.
type countEventsFn struct{ Run string }

func (f *countEventsFn) ProcessElement(typedEvent, func(int)) { countOne(f.Run) }

type countProtosFn struct{ Run string }

func (f *countProtosFn) ProcessElement(*pubsubpb.PubsubMessage, func(int)) { countOne(f.Run) }
