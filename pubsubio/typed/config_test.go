package typed

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// unregistered is a named type nobody registered with Beam.
type unregistered struct{ N int }

// Every invalid configuration is refused at construction, naming the
// option and the value.
func TestDecodeRejectsAtConstruction(t *testing.T) {
	topic := model.TopicOf(testProject, "readings")
	for _, tc := range []struct {
		name string
		cfg  DecodeConfig
		t    reflect.Type
		want []string
	}{
		{"no format", DecodeConfig{}, readingType, []string{"Format is required"}},
		{"unknown format", DecodeConfig{Format: "XML"}, readingType, []string{`Format "XML" is unknown`}},
		{"record format", DecodeConfig{Format: model.FormatText}, readingType, []string{`Format "TEXT" holds no typed value`, `"AVRO"`}},
		{"JSON with an encoding", DecodeConfig{Format: model.FormatJSON, Encoding: EncodingBinary}, readingType, []string{`Encoding "BINARY" does not apply to Format JSON`}},
		{"unknown encoding", DecodeConfig{Format: model.FormatAvro, AvroSchema: readingSchema, Encoding: "TEXT"}, readingType, []string{`Encoding "TEXT" is unknown`}},
		{"Avro without a schema", DecodeConfig{Format: model.FormatAvro}, readingType, []string{"needs the writer's schema"}},
		{"an Avro schema for JSON", DecodeConfig{Format: model.FormatJSON, AvroSchema: readingSchema}, readingType, []string{"AvroSchema is set, but Format is \"JSON\""}},
		{"Nack", DecodeConfig{Format: model.FormatJSON, DecodePolicy: model.DecodeNack}, readingType, []string{"DecodePolicy NACK cannot apply after the read", "nothing left to nack"}},
		{"unknown policy", DecodeConfig{Format: model.FormatJSON, DecodePolicy: "RETRY"}, readingType, []string{`DecodePolicy "RETRY" is unknown`}},
		{"bad topic", DecodeConfig{Format: model.FormatJSON, Topic: model.TopicOf(testProject, "x")}, readingType, []string{"Topic: topic ID \"x\" is invalid"}},
		{"bad connection", DecodeConfig{Format: model.FormatJSON, Connection: connection.Settings{EmulatorEndpoint: "http://x:1"}}, readingType, []string{"Connection: EmulatorEndpoint"}},
		{"unregistered type", DecodeConfig{Format: model.FormatJSON}, reflect.TypeOf(unregistered{}), []string{"typed.unregistered is not registered with Beam", "beam.RegisterType(reflect.TypeOf((*typed.unregistered)(nil)).Elem())"}},
		{"nil type", DecodeConfig{Format: model.FormatJSON}, nil, []string{"element type is nil"}},
		{"proto struct", DecodeConfig{Format: model.FormatProtobuf}, pubsubMessageType.Elem(), []string{"not its pointer type"}},
		{"Avro into a map", DecodeConfig{Format: model.FormatAvro, Topic: topic}, reflect.TypeOf(map[string]string{}), []string{"not a struct"}},
		{"an Avro schema the type does not fit", DecodeConfig{Format: model.FormatAvro, AvroSchema: readingSchema}, readingType, []string{"AvroSchema: ", "typed.reading.Unit"}},
	} {
		_, s := beam.NewPipelineWithRoot()
		msgs := beam.Create(s, model.Message{})
		_, _, err := TryDecode(s, tc.cfg, tc.t, msgs)
		wantError(t, tc.name, err, append(tc.want, "pubsubio.Decode: invalid configuration")...)
		if err != nil && !errors.Is(err, construct.ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", tc.name, err)
		}
	}
	_, s := beam.NewPipelineWithRoot()
	_, _, err := TryDecode(s, DecodeConfig{Format: model.FormatJSON}, readingType, beam.Create(s, "x"))
	wantError(t, "a PCollection<string>", err, "PCollection<string>, not PCollection<pubsubio.Message>")
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "Format is required") {
			t.Errorf("Decode with no format: recovered %v", r)
		}
	}()
	Decode(s, DecodeConfig{}, readingType, beam.Create(s, model.Message{}))
}

func TestEncodeRejectsAtConstruction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    EncodeConfig
		values func(beam.Scope) beam.PCollection
		want   []string
	}{
		{"unknown policy", EncodeConfig{Format: model.FormatJSON, FailurePolicy: "RETRY"}, readings, []string{`FailurePolicy "RETRY" is unknown`}},
		{"a record field with no struct field", EncodeConfig{Format: model.FormatAvro, AvroSchema: `{"type":"record","name":"R","fields":[{"name":"sensor","type":"string"},{"name":"value","type":"double"},{"name":"unit","type":["null","string"]},{"name":"site","type":"string"}]}`}, readings,
			[]string{`field "site" of record R has no default`}},
		{"a struct field with no record field", EncodeConfig{Format: model.FormatAvro, AvroSchema: readingSchema}, readings, []string{"typed.reading.Unit: record Reading has no field"}},
		{"a KV not keyed by Message", EncodeConfig{Format: model.FormatJSON}, func(s beam.Scope) beam.PCollection {
			return beam.ParDo(s, func(r reading) (string, reading) { return r.Sensor, r }, readings(s))
		}, []string{"KV<string, typed.reading>", "KV<pubsubio.Message, T>"}},
		{"protobuf of a struct", EncodeConfig{Format: model.FormatProtobuf}, readings, []string{"not a generated Protocol Buffer message"}},
	} {
		_, s := beam.NewPipelineWithRoot()
		_, _, err := TryEncode(s, tc.cfg, tc.values(s))
		wantError(t, tc.name, err, append(tc.want, "pubsubio.Encode: invalid configuration")...)
		if err != nil && !errors.Is(err, construct.ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", tc.name, err)
		}
	}
	_, s := beam.NewPipelineWithRoot()
	_, _, err := TryEncode(s, EncodeConfig{Format: model.FormatJSON}, beam.PCollection{})
	wantError(t, "no input", err, "not valid")
	if !errors.Is(err, construct.ErrInvalidConfig) {
		t.Errorf("no input: %v does not wrap ErrInvalidConfig", err)
	}
	defer func() {
		if r, _ := recover().(error); !errors.Is(r, construct.ErrInvalidConfig) || !strings.Contains(r.Error(), "Format is required") {
			t.Errorf("Encode with no format: recovered %v", r)
		}
	}()
	Encode(s, EncodeConfig{}, readings(s))
}

func readings(s beam.Scope) beam.PCollection { return beam.Create(s, reading{Sensor: "a"}) }
