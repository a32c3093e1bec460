package typed

import (
	"fmt"
	"reflect"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var protoMessageType = reflect.TypeOf((*proto.Message)(nil)).Elem()

// checkProtoType returns why t is not a generated message's pointer type.
func checkProtoType(t reflect.Type) error {
	switch {
	case t.Kind() == reflect.Pointer && t.Implements(protoMessageType):
		return nil
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(protoMessageType):
		return fmt.Errorf("the element type %v is a generated message, not its pointer type: pass reflect.TypeOf((*%v)(nil)) (messages must not be copied)", t, t)
	}
	return fmt.Errorf("the element type %v is not a generated Protocol Buffer message (proto.Message), which Format %s needs, as its pointer type: reflect.TypeOf((*pb.Order)(nil))", t, model.FormatProtobuf)
}

// protoCodec is model.FormatProtobuf: google.golang.org/protobuf, binary or the
// canonical JSON mapping, into and from *M, t.
type protoCodec struct{ t reflect.Type }

// protoJSONIn ignores fields the generated type does not know, as binary
// decoding does (it keeps them as unknown fields): a newer revision of the
// schema adding a field must not make its messages undecodable.
var protoJSONIn = protojson.UnmarshalOptions{DiscardUnknown: true}

func (c protoCodec) decode(data []byte, enc Encoding) (any, error) {
	m := reflect.New(c.t.Elem()).Interface().(proto.Message)
	var err error
	if enc == EncodingJSON {
		err = protoJSONIn.Unmarshal(data, m)
	} else {
		err = proto.Unmarshal(data, m)
	}
	if err != nil {
		return nil, fmt.Errorf("the payload is not a %s in the Protocol Buffer %s encoding: %w", m.ProtoReflect().Descriptor().FullName(), enc, err)
	}
	return m, nil
}

func (c protoCodec) encode(v any, enc Encoding) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok || reflect.ValueOf(v).IsNil() {
		return nil, fmt.Errorf("the value is a nil %v, which has nothing to encode", c.t)
	}
	var b []byte
	var err error
	if enc == EncodingJSON {
		b, err = protojson.Marshal(m)
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil {
		return nil, fmt.Errorf("the value does not encode in the Protocol Buffer %s encoding: %w", enc, err)
	}
	return b, nil
}
