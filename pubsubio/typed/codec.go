package typed

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// codec turns the payloads of one format into values of the element type,
// and values back into payloads, in either encoding (model.FormatJSON has only
// one, and ignores it). A decode or encode error says what is wrong and
// where; it never quotes the payload, which may be sensitive and travels
// in the dead letter anyway.
type codec interface {
	decode(data []byte, enc Encoding) (any, error)
	encode(v any, enc Encoding) ([]byte, error)
}

// checkRegistered returns why t cannot travel in a pipeline: a named type
// Beam does not know. Beam serializes an unregistered struct field by
// field, so a worker started from the staged binary would get an
// anonymous struct, not t, and the pipeline would fail there instead of
// here. Unnamed and predeclared types need no registration.
func checkRegistered(t reflect.Type) error {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	key, ok := runtime.TypeKey(base)
	if !ok {
		return nil
	}
	if _, ok := runtime.LookupType(key); !ok {
		return fmt.Errorf("the element type %v is not registered with Beam: call beam.RegisterType(reflect.TypeOf((*%s)(nil)).Elem()) in an init function, so that every worker knows it", t, base)
	}
	return nil
}

// newCodec returns the codec of format f for values of t; avroSchema is
// model.FormatAvro's writer's schema.
func newCodec(f model.Format, t reflect.Type, avroSchema string, dir direction) (codec, error) {
	switch f {
	case model.FormatAvro:
		return newAvroCodec(avroSchema, t, dir, false)
	case model.FormatProtobuf:
		return protoCodec{t}, nil
	}
	return jsonCodec{t}, nil
}
