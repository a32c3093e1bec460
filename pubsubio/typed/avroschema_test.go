package typed

import (
	"errors"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// nodeSchema is a linked list: a record whose field "next" holds another
// of itself, or null.
const nodeSchema = `{"type": "record", "name": "Node", "namespace": "com.example", "fields": [
  {"name": "value", "type": "long"},
  {"name": "next", "type": ["null", "Node"], "default": null}]}`

// node maps the value alone and leaves "next" out, so that mapping the
// struct never reaches the cycle.
type node struct {
	Value int64 `avro:"value"`
}

var nodeType = reflect.TypeOf(node{})

// A schema whose records contain themselves, directly or through other
// types, is refused at construction, naming the record, even when the
// element type leaves the recursive field out: goavro would read every
// level a payload nests, one call each.
func TestAvroRecursiveSchemaRefused(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         []string
	}{
		{"itself, in a union", nodeSchema, []string{`record "com.example.Node" field "next"`, `type "Node" is record com.example.Node, which contains it`}},
		{"through another record", `{"type": "record", "name": "A", "fields": [{"name": "value", "type": "long"},
		  {"name": "b", "type": ["null", {"type": "record", "name": "B", "fields": [{"name": "a", "type": "A"}]}], "default": null}]}`,
			[]string{`record "B" field "a"`, `type "A" is record A, which contains it`}},
		{"through an array", `{"type": "record", "name": "T", "namespace": "x", "fields": [{"name": "value", "type": "long"},
		  {"name": "children", "type": {"type": "array", "items": "x.T"}, "default": []}]}`, []string{`type "x.T" is record x.T`}},
		{"through a map", `{"type": "record", "name": "T", "fields": [{"name": "value", "type": "long"},
		  {"name": "children", "type": {"type": "map", "values": {"type": "T"}}, "default": {}}]}`, []string{`type "T" is record T`}},
	} {
		_, s := beam.NewPipelineWithRoot()
		_, _, err := TryDecode(s, DecodeConfig{Format: model.FormatAvro, AvroSchema: tc.schema}, nodeType, beam.Create(s, model.Message{}))
		wantError(t, tc.name+", decoding", err, append(tc.want, "pubsubio.Decode: invalid configuration", "AvroSchema: ", "contain themselves")...)
		if !errors.Is(err, construct.ErrInvalidConfig) {
			t.Errorf("%s, decoding: %v does not wrap ErrInvalidConfig", tc.name, err)
		}
		_, _, err = TryEncode(s, EncodeConfig{Format: model.FormatAvro, AvroSchema: tc.schema}, beam.Create(s, node{Value: 1}))
		wantError(t, tc.name+", encoding", err, append(tc.want, "pubsubio.Encode: invalid configuration")...)
		if !errors.Is(err, construct.ErrInvalidConfig) {
			t.Errorf("%s, encoding: %v does not wrap ErrInvalidConfig", tc.name, err)
		}
	}
	// A record referred to twice is no cycle.
	twice := `{"type": "record", "name": "R", "fields": [{"name": "value", "type": "long"},
	  {"name": "a", "type": {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]}}, {"name": "b", "type": "P"}]}`
	if _, err := newAvroCodec(twice, nodeType, decoding, false); err != nil {
		t.Errorf("a record referred to twice: %v", err)
	}
}
