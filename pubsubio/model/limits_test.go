package model

import (
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/proto"
)

func TestSerializedSizeEqualsProtoSize(t *testing.T) {
	long := strings.Repeat("x", 300) // lengths past one varint byte
	for name, m := range map[string]Message{
		"empty":                 {},
		"data":                  {Data: []byte("hello")},
		"long data":             {Data: []byte(strings.Repeat("d", 100000))},
		"attributes":            {Data: []byte("d"), Attributes: map[string]string{"a": "1", "bb": "22"}},
		"empty key and value":   {Attributes: map[string]string{"": ""}},
		"long attribute":        {Attributes: map[string]string{long: long}},
		"ordering key":          {Data: []byte("d"), OrderingKey: "k"},
		"everything, long":      {Data: []byte(long), Attributes: map[string]string{"k": long, long: "v"}, OrderingKey: long},
		"fields the sink drops": {Data: []byte("d"), ID: "id", Topic: Topic{Project: "p", ID: "t"}},
	} {
		want := proto.Size(&pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey})
		if got := SerializedSize(m); got != want {
			t.Errorf("%s: SerializedSize = %d, proto.Size = %d", name, got, want)
		}
	}
}

func TestMaxMessageSizeCountsTheTopicName(t *testing.T) {
	short, long := Topic{Project: "p", ID: "t"}, Topic{Project: "p", ID: strings.Repeat("t", 200)}
	if d := MaxMessageSize(short) - MaxMessageSize(long); d != 199+1 { // 199 more name bytes, one more length byte
		t.Errorf("a topic name 199 bytes longer leaves %d bytes less room, want 200", d)
	}
}

// Pub/Sub refuses attribute keys starting with "goog" in any case, but for
// the trace context keys its client libraries publish.
func TestAttributeKeyProblemReservedKeys(t *testing.T) {
	for k, refused := range map[string]bool{
		"googclient_traceparent":           false,
		"googclient_tracestate":            false,
		"googclient_x-cloud-trace-context": true,
		"googclient_schemaname":            true,
		"googclient_TraceParent":           true,
		"goog":                             true,
		"GOOGfoo":                          true,
		"gooseberry":                       false,
		"go":                               false,
		"my_googclient_traceparent":        false,
	} {
		if got := AttributeKeyProblem(k) != ""; got != refused {
			t.Errorf("AttributeKeyProblem(%q) = %q; want refused %v", k, AttributeKeyProblem(k), refused)
		}
	}
}
