package typed

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.Function2x1(encodedAt)
	register.Function1x1(validateSummary)
}

// encodedAt is a message Encode emitted: its event time, topic, ordering
// key, attribute keys and payload.
func encodedAt(at beam.EventTime, m model.Message) string {
	return fmt.Sprintf("@%d %s %s %v %q", at.Milliseconds(), m.Topic.ID, m.OrderingKey, slices.Sorted(maps.Keys(m.Attributes)), m.Data)
}

func validateSummary(f dlq.FailedMessage) string {
	return fmt.Sprintf("%s %s %s data=%s", f.Stage, f.Code, f.Topic.ID, f.Message.Data)
}

// On Prism: values encode at their event times, addressed to Topic; a value
// JSON cannot hold is a dead letter with stage validate; what Encode wrote
// decodes back to the values.
func TestEncodeOnPrism(t *testing.T) {
	f := newFakeSchemas(t)
	topic := f.topic(t, "readings", "", 0)
	p, s := beam.NewPipelineWithRoot()
	decoded, _ := Decode(s, DecodeConfig{Format: model.FormatJSON}, readingType,
		messagesAt(s, jsonMessage("a", `{"sensor":"t1","value":1.5}`), jsonMessage("bb", `{"sensor":"t2","value":-2}`)))
	bad := beam.CreateList(s, []reading{{Sensor: "nan", Value: math.NaN()}})
	msgs, dead := Encode(s, EncodeConfig{Format: model.FormatJSON, Topic: topic, FailurePolicy: model.PolicyDeadLetter, Connection: f.conn}, beam.Flatten(s, decoded, bad))
	passert.Equals(s, beam.ParDo(s, encodedAt, msgs),
		`@1716700001000 readings  [] "{\"sensor\":\"t1\",\"value\":1.5}"`,
		`@1716700002000 readings  [] "{\"sensor\":\"t2\",\"value\":-2}"`)
	passert.Equals(s, beam.ParDo(s, validateSummary, dead), "validate INVALID_ARGUMENT readings data={Sensor:nan Value:NaN Unit:<nil>}")
	again, _ := Decode(s, DecodeConfig{Format: model.FormatJSON}, readingType, msgs)
	passert.Equals(s, beam.ParDo(s, readingAt, again), "t1=1.5@1716700001000", "t2=-2@1716700002000")
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// A read, a change, a republish: Decode under KeepMessage, then Encode in
// Avro for a topic with a schema, which keeps each message's attributes
// and ordering key, less the schema attributes Pub/Sub sets itself.
func TestEncodeKeepMessageOnPrism(t *testing.T) {
	f := newFakeSchemas(t)
	revs := f.schema(t, "readings", pubsubpb.Schema_AVRO, readingSchema, readingSchemaV2)
	topic := f.topic(t, "readings-avro", "readings", pubsubpb.Encoding_BINARY)
	in := schemaMessage("1", "readings", revs[1], EncodingJSON, avroPayload(t, readingSchemaV2, map[string]any{"sensor": "b", "value": 2.0, "unit": nil}, EncodingJSON))
	in.OrderingKey = "sensor-b"
	p, s := beam.NewPipelineWithRoot()
	kept, _ := Decode(s, DecodeConfig{Format: model.FormatAvro, AvroSchema: readingSchemaV2, KeepMessage: true, Connection: f.conn}, readingType, messagesAt(s, in))
	msgs, _ := Encode(s, EncodeConfig{Format: model.FormatAvro, Topic: topic, Connection: f.conn}, kept)
	want := avroPayload(t, readingSchemaV2, map[string]any{"sensor": "b", "value": 2.0, "unit": nil}, EncodingBinary)
	passert.Equals(s, beam.ParDo(s, encodedAt, msgs), fmt.Sprintf("@1716700000000 readings-avro sensor-b [site] %q", want))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// A topic whose schema does not match fails the pipeline before the first
// value, naming the topic, its schema and the mismatch.
func TestEncodeTopicMismatchOnPrism(t *testing.T) {
	f := newFakeSchemas(t)
	f.schema(t, "readings", pubsubpb.Schema_AVRO, readingSchema, readingSchemaV2)
	topic := f.topic(t, "readings-avro", "readings", pubsubpb.Encoding_JSON)
	p, s := beam.NewPipelineWithRoot()
	Encode(s, EncodeConfig{Format: model.FormatAvro, AvroSchema: readingSchemaV2, Topic: topic, Connection: f.conn}, beam.CreateList(s, []reading{{Sensor: "a"}}))
	wantError(t, "an encoding mismatch", ptest.Run(p),
		"Topic projects/typed-project/topics/readings-avro has schema projects/typed-project/schemas/readings (AVRO, encoding JSON)", "Encoding is BINARY, the topic's JSON")
}
