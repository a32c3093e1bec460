package typed

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.Function2x0(atPublishTime)
	register.Function2x1(readingAt)
	register.Function2x1(keptReading)
	register.Function1x1(deadLetterSummary)
}

// atPublishTime emits m at its publish time, as the read does.
func atPublishTime(m model.Message, emit func(beam.EventTime, model.Message)) {
	emit(mtime.FromTime(m.PublishTime), m)
}

// readingAt is a reading with its event time, in Unix milliseconds.
func readingAt(at beam.EventTime, r reading) string {
	unit := ""
	if r.Unit != nil {
		unit = *r.Unit
	}
	return fmt.Sprintf("%s=%v%s@%d", r.Sensor, r.Value, unit, at.Milliseconds())
}

// keptReading is a reading with what Decode kept of its message.
func keptReading(m model.Message, r reading) string {
	keys := slices.Sorted(maps.Keys(m.Attributes))
	return fmt.Sprintf("%s %s=%v data=%d attrs=%v key=%s sub=%s", m.ID, r.Sensor, r.Value, len(m.Data), keys, m.OrderingKey, m.Subscription.ID)
}

// deadLetterSummary is a dead letter's message ID, stage, subscription,
// code and whether its error names the message, for passert.
func deadLetterSummary(f dlq.FailedMessage) string {
	return fmt.Sprintf("%s %s %s code=%q named=%v data=%q", f.Message.ID, f.Stage, f.Subscription.ID, f.Code, strings.Contains(f.Error, `"`+f.Message.ID+`"`), f.Message.Data)
}

// messagesAt returns the messages, at their publish times, in a pipeline.
func messagesAt(s beam.Scope, msgs ...model.Message) beam.PCollection {
	return beam.ParDo(s, atPublishTime, beam.CreateList(s, msgs))
}

func jsonMessage(id, data string) model.Message {
	return model.Message{
		ID: id, Data: []byte(data), PublishTime: time.UnixMilli(1716700000000 + int64(len(id))*1000),
		Attributes: map[string]string{"site": "north"}, OrderingKey: "k-" + id,
		Subscription: model.SubscriptionOf(testProject, "readings-sub"),
	}
}

// On Prism: good payloads become values at their messages' event times,
// and the rest dead letters naming the message, its subscription kept.
func TestDecodeOnPrism(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	msgs := messagesAt(s, jsonMessage("a", `{"sensor":"t1","value":1.5}`), jsonMessage("bb", `{"sensor":`),
		jsonMessage("ccc", `{"sensor":"t2","value":2,"unit":"K"}`), jsonMessage("dddd", `{"value":"high"}`))
	values, dead := Decode(s, DecodeConfig{Format: model.FormatJSON, DecodePolicy: model.DecodeDeadLetter}, readingType, msgs)
	passert.Equals(s, beam.ParDo(s, readingAt, values), "t1=1.5@1716700001000", "t2=2K@1716700003000")
	passert.Equals(s, beam.ParDo(s, deadLetterSummary, dead),
		`bb decode readings-sub code="" named=true data="{\"sensor\":"`,
		`dddd decode readings-sub code="" named=true data="{\"value\":\"high\"}"`)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// KeepMessage emits each value beside its message, Data cleared; DecodeDrop
// counts each message that does not decode in typed_decode_failures, and
// goes on with the rest.
func TestDecodeKeepMessageOnPrism(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	msgs := messagesAt(s, jsonMessage("a", `{"sensor":"t1","value":1}`), jsonMessage("bb", `not json`),
		jsonMessage("ccc", `{"sensor":"t2","value":2}`), jsonMessage("dddd", `{"sensor":`))
	values, _ := Decode(s, DecodeConfig{Format: model.FormatJSON, KeepMessage: true, DecodePolicy: model.DecodeDrop}, readingType, msgs)
	passert.Equals(s, beam.ParDo(s, keptReading, values),
		"a t1=1 data=0 attrs=[site] key=k-a sub=readings-sub", "ccc t2=2 data=0 attrs=[site] key=k-ccc sub=readings-sub")
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := counterValue(res, "typed_decode_failures"); n != 2 {
		t.Errorf("typed_decode_failures = %d, want 2 for the 2 payloads that are not readings", n)
	}
}

// DecodeFail, the default, fails the bundle naming the message.
func TestDecodeFailOnPrism(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	msgs := messagesAt(s, jsonMessage("a", `{"sensor":"t1","value":1}`), jsonMessage("poison-7", `{"sensor":`))
	Decode(s, DecodeConfig{Format: model.FormatJSON}, readingType, msgs)
	err := ptest.Run(p)
	wantError(t, "a poison message under DecodeFail", err, `message "poison-7" from projects/typed-project/subscriptions/readings-sub cannot be decoded`, "DEAD_LETTER")
}

// On Prism against pstest's schema service: messages of two revisions,
// in both encodings, decode with their own revision; a message naming a
// revision that does not exist, or one whose record contains itself, is a
// dead letter; each revision is fetched once.
func TestDecodeRevisionsOnPrism(t *testing.T) {
	resetRevisions(t)
	f := newFakeSchemas(t)
	recursive := `{"type": "record", "name": "Reading", "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"},
	  {"name": "previous", "type": ["null", "Reading"], "default": null}]}`
	revs := f.schema(t, "readings", pubsubpb.Schema_AVRO, readingSchema, readingSchemaV2, recursive)
	v1 := schemaMessage("1", "readings", revs[0], EncodingBinary, avroPayload(t, readingSchema, map[string]any{"sensor": "a", "value": 1.0}, EncodingBinary))
	v2 := schemaMessage("2", "readings", revs[1], EncodingJSON, avroPayload(t, readingSchemaV2, map[string]any{"sensor": "b", "value": 2.0, "unit": map[string]any{"string": "K"}}, EncodingJSON))
	v2b := schemaMessage("3", "readings", revs[1], EncodingBinary, avroPayload(t, readingSchemaV2, map[string]any{"sensor": "c", "value": 3.0, "unit": nil}, EncodingBinary))
	gone := schemaMessage("4", "readings", "deadbeef", EncodingBinary, v1.Data)
	deep := schemaMessage("5", "readings", revs[2], EncodingBinary, append([]byte{0x02, 'd', 0, 0, 0, 0, 0, 0, 0, 0}, bytes.Repeat([]byte{0x02, 0x02, 'd', 0, 0, 0, 0, 0, 0, 0, 0}, 1000)...))
	p, s := beam.NewPipelineWithRoot()
	values, dead := Decode(s, DecodeConfig{Format: model.FormatAvro, AvroSchema: readingSchemaV2, DecodePolicy: model.DecodeDeadLetter, Connection: f.conn},
		readingType, messagesAt(s, v1, v2, v2b, gone, deep))
	passert.Equals(s, beam.ParDo(s, readingAt, values), "a=1@1716700000000", "b=2K@1716700000000", "c=3@1716700000000")
	passert.Equals(s, beam.ParDo(s, deadLetterSummary, dead), fmt.Sprintf("4 decode readings-sub code=\"NOT_FOUND\" named=true data=%q", v1.Data),
		fmt.Sprintf("5 decode readings-sub code=\"\" named=true data=%q", deep.Data))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	if n := f.gets.count(); n != 4 {
		t.Errorf("GetSchema was called %d times for 4 revisions", n)
	}
}
