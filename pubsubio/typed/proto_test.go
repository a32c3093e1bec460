package typed

import (
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The tests use a generated message of the module graph, with strings,
// bytes, a map and a nested message.
var pubsubMessageType = reflect.TypeOf((*pubsubpb.PubsubMessage)(nil))

func sampleProto() *pubsubpb.PubsubMessage {
	return &pubsubpb.PubsubMessage{
		Data: []byte{0, 1, 0xff}, Attributes: map[string]string{"k": "v"}, MessageId: "m-1",
		PublishTime: timestamppb.New(sampleOrder().At), OrderingKey: "key",
	}
}

func TestProtoRoundTrip(t *testing.T) {
	c := protoCodec{pubsubMessageType}
	for _, enc := range []Encoding{EncodingBinary, EncodingJSON} {
		data, err := c.encode(sampleProto(), enc)
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		got, err := c.decode(data, enc)
		if err != nil {
			t.Fatalf("%s: decoding %q: %v", enc, data, err)
		}
		if !proto.Equal(got.(*pubsubpb.PubsubMessage), sampleProto()) {
			t.Errorf("%s: got %v", enc, got)
		}
	}
	// Fields the generated type does not know, from a newer revision of
	// the schema, are not a failure in either encoding.
	if _, err := c.decode([]byte(`{"messageId":"m","addedLater":{"x":1}}`), EncodingJSON); err != nil {
		t.Errorf("an unknown JSON field: %v", err)
	}
	if got, err := c.decode(append([]byte{0xf8, 0x3e, 0x01}, mustMarshal(t, sampleProto())...), EncodingBinary); err != nil || got.(*pubsubpb.PubsubMessage).GetMessageId() != "m-1" {
		t.Errorf("an unknown binary field: %v, %v", got, err)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProtoMalformed(t *testing.T) {
	c := protoCodec{pubsubMessageType}
	good := mustMarshal(t, sampleProto())
	for _, tc := range []struct {
		name string
		data []byte
		enc  Encoding
	}{
		{"truncated", good[:len(good)-3], EncodingBinary},
		{"a length past the end", []byte{0x0a, 0x7f, 's', 'e', 'c', 'r', 'e', 't'}, EncodingBinary},
		{"JSON for binary", []byte(`{"messageId":"secret"}`), EncodingBinary},
		{"binary for JSON", good, EncodingJSON},
		{"a field of the wrong type", []byte(`{"messageId":7}`), EncodingJSON},
	} {
		_, err := c.decode(tc.data, tc.enc)
		wantError(t, tc.name, err, "not a google.pubsub.v1.PubsubMessage", string(tc.enc))
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q quotes the payload", tc.name, err)
		}
	}
}

func TestProtoEncodeRejects(t *testing.T) {
	c := protoCodec{pubsubMessageType}
	_, err := c.encode((*pubsubpb.PubsubMessage)(nil), EncodingBinary)
	wantError(t, "nil", err, "nil *pubsubpb.PubsubMessage")
	for _, enc := range []Encoding{EncodingBinary, EncodingJSON} {
		_, err = c.encode(&pubsubpb.PubsubMessage{MessageId: "bad \xff utf-8"}, enc)
		wantError(t, "invalid UTF-8 in a proto3 string", err, "does not encode", string(enc))
	}
}

func TestProtoTypeChecks(t *testing.T) {
	if err := checkProtoType(pubsubMessageType); err != nil {
		t.Error(err)
	}
	wantError(t, "the struct, not its pointer", checkProtoType(pubsubMessageType.Elem()), "not its pointer type", "reflect.TypeOf((*pubsubpb.PubsubMessage)(nil))")
	wantError(t, "not a message", checkProtoType(readingType), "not a generated Protocol Buffer message")
}
