package sink

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Pub/Sub's documented per-message limits
// (https://cloud.google.com/pubsub/quotas#resource_limits), written here as
// numbers rather than taken from model, so that the fuzz target checks the
// sink against the documentation and not against itself.
const (
	docMaxAttributes     = 100
	docMaxAttributeKey   = 256
	docMaxAttributeValue = 1024
	docMaxOrderingKey    = 1024
	docMaxPublishRequest = 10_000_000 // bytes of one PublishRequest, topic included
	// Keys must not begin with "goog" in any case ("must not begin with
	// 'goog' (case-insensitive)", Pub/Sub's own error text), but for the
	// W3C trace context keys the client libraries publish.
	docReservedKeyPrefix = "goog"
)

// docTraceContextKeys are the reserved keys Pub/Sub takes from publishers.
var docTraceContextKeys = map[string]bool{"googclient_traceparent": true, "googclient_tracestate": true}

// reservedKey reports whether Pub/Sub refuses k as an attribute key.
func reservedKey(k string) bool {
	return strings.HasPrefix(strings.ToLower(k), docReservedKeyPrefix) && !docTraceContextKeys[k]
}

// How FuzzCheckLimits reaches the request limit: a dataLen with the flag bit
// set grows the payload to within boundaryWindow bytes either side of it.
const (
	boundaryWindow         = 512
	boundaryDataLenPrefix  = 0x8000
	boundaryDataLenDivisor = 2 * boundaryWindow
)

// brokenLimits lists the documented limits m breaks when published alone to
// topic: the request is built and sized the way the wire carries it, and
// proto.Marshal rejects the invalid UTF-8 that Pub/Sub's string fields
// cannot carry.
func brokenLimits(topic model.Topic, m model.Message) []string {
	var broken []string
	if len(m.Data) == 0 && len(m.Attributes) == 0 {
		broken = append(broken, "neither data nor attributes")
	}
	if len(m.Attributes) > docMaxAttributes {
		broken = append(broken, "attribute count")
	}
	for k, v := range m.Attributes {
		if len(k) > docMaxAttributeKey || len(v) > docMaxAttributeValue || reservedKey(k) {
			broken = append(broken, "attribute "+strconv.Quote(k))
		}
	}
	if len(m.OrderingKey) > docMaxOrderingKey {
		broken = append(broken, "ordering key length")
	}
	req := &pubsubpb.PublishRequest{
		Topic:    topic.String(),
		Messages: []*pubsubpb.PubsubMessage{{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey}},
	}
	if _, err := proto.Marshal(req); err != nil {
		broken = append(broken, "not marshalable: "+err.Error())
	}
	if n := proto.Size(req); n > docMaxPublishRequest {
		broken = append(broken, "request of "+strconv.Itoa(n)+" bytes")
	}
	return broken
}

// FuzzCheckLimits: checkLimits never panics; it accepts a message exactly
// when the message is within Pub/Sub's documented limits; a rejection is
// INVALID_ARGUMENT (the code the writer routes by) and its text is valid
// UTF-8 however broken the message, since it ends up in a log line and a
// dead letter's attribute. dataLen, when its 0x8000 bit is set, grows the
// payload to within boundaryWindow bytes of the 10 MB request limit, which
// the fuzzer would not reach by mutation.
func FuzzCheckLimits(f *testing.F) {
	f.Add([]byte("x"), "k", "v", "", "", "", uint8(0), uint16(0))
	f.Add([]byte{}, "", "", "", "", "", uint8(0), uint16(0))
	f.Add([]byte{}, "k", "v", "", "", "", uint8(0), uint16(0))
	f.Add([]byte("x"), "googclient_x", "1", "", "", "", uint8(0), uint16(0))
	f.Add([]byte("x"), "googclient_traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "GOOGx", "1", "", uint8(0), uint16(0))
	f.Add([]byte("x"), "\xff", "1", "k", "\xff", "\xff", uint8(0), uint16(0))
	f.Add([]byte("x"), strings.Repeat("k", 256), strings.Repeat("v", 1024), strings.Repeat("K", 257), strings.Repeat("V", 1025), strings.Repeat("o", 1024), uint8(0), uint16(0))
	f.Add([]byte("x"), "k", "v", "", "", strings.Repeat("o", 1025), uint8(98), uint16(0))
	f.Add([]byte("x"), "k", "v", "l", "w", "", uint8(99), uint16(0))
	f.Add([]byte("x"), "", "", "", "", "", uint8(0), uint16(boundaryDataLenPrefix))
	f.Add([]byte("x"), "", "", "", "", "", uint8(0), uint16(boundaryDataLenPrefix|boundaryWindow))
	f.Add([]byte("x"), "k", "v", "", "", "key", uint8(3), uint16(boundaryDataLenPrefix|(boundaryWindow+7)))
	topic := model.TopicOf("pubsubio-fuzz", "limits")
	f.Fuzz(func(t *testing.T, data []byte, k1, v1, k2, v2, orderingKey string, extraAttrs uint8, dataLen uint16) {
		if dataLen&boundaryDataLenPrefix != 0 {
			n := docMaxPublishRequest - boundaryWindow + int(dataLen)%boundaryDataLenDivisor
			grown := make([]byte, n)
			copy(grown, data)
			data = grown
		}
		m := model.Message{Data: data, OrderingKey: orderingKey}
		if k1 != "" || v1 != "" || k2 != "" || v2 != "" || extraAttrs > 0 {
			m.Attributes = map[string]string{k1: v1, k2: v2}
			for i := range int(extraAttrs) {
				m.Attributes["attr-"+strconv.Itoa(i)] = "v"
			}
		}
		err := checkLimits(topic, m, messageSize(m))
		broken := brokenLimits(topic, m)
		if err == nil && len(broken) > 0 {
			t.Fatalf("checkLimits accepted a message that breaks Pub/Sub's limits (%s)", strings.Join(broken, "; "))
		}
		if err != nil && len(broken) == 0 {
			t.Fatalf("checkLimits rejected a message within Pub/Sub's limits: %v", err)
		}
		if err == nil {
			return
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("rejection has code %v, want INVALID_ARGUMENT: %v", status.Code(err), err)
		}
		if !utf8.ValidString(err.Error()) {
			t.Fatalf("rejection text is not valid UTF-8: %q", err.Error())
		}
	})
}
