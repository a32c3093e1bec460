package model

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/protobuf/encoding/protowire"
)

// Pub/Sub's per-message limits (https://cloud.google.com/pubsub/quotas,
// resource limits). The sink checks messages against them before sending,
// and the dead-letter writer builds its envelopes within them, so both
// follow one statement of what Pub/Sub accepts.
const (
	MaxAttributes          = 100
	MaxAttributeKeyBytes   = 256
	MaxAttributeValueBytes = 1024
	MaxOrderingKeyBytes    = 1024
	// ReservedAttributePrefix starts attribute keys Pub/Sub reserves for
	// itself, in any case, but for the trace context keys.
	ReservedAttributePrefix = "goog"
	// TraceAttributePrefix starts the keys in which Pub/Sub's client
	// libraries carry trace context: W3C's traceparent and tracestate
	// headers, prefixed, the only reserved keys Pub/Sub takes from a
	// publisher.
	TraceAttributePrefix = "googclient_"
)

// traceContextKeys are the reserved keys Pub/Sub takes from a publisher:
// those the client libraries' tracing publishes (the Go, Java and Python
// clients', with W3C propagation). Other keys under the same prefix are
// refused, as "googclient_x-cloud-trace-context" is, which a client
// publishes when configured with Google's Cloud Trace propagator.
var traceContextKeys = map[string]bool{
	TraceAttributePrefix + "traceparent": true,
	TraceAttributePrefix + "tracestate":  true,
}

// AttributeKeyProblem says why Pub/Sub would refuse k as an attribute
// key ("is not valid UTF-8"), or returns "" if it accepts it.
func AttributeKeyProblem(k string) string {
	switch {
	case !utf8.ValidString(k):
		return "is not valid UTF-8"
	case len(k) > MaxAttributeKeyBytes:
		return fmt.Sprintf("is %d bytes, over Pub/Sub's %d", len(k), MaxAttributeKeyBytes)
	case len(k) >= len(ReservedAttributePrefix) && strings.EqualFold(k[:len(ReservedAttributePrefix)], ReservedAttributePrefix) && !traceContextKeys[k]:
		return fmt.Sprintf("starts with %q, which Pub/Sub reserves (in any case; only the trace context keys %straceparent and %stracestate are taken)",
			ReservedAttributePrefix, TraceAttributePrefix, TraceAttributePrefix)
	}
	return ""
}

// SerializedSize is m's serialized size as the client computes it for its
// own accounting (publisher.go, Publish: proto.Size of the PubsubMessage
// with data, attributes and ordering key). It runs for every message the
// sink writes, so it counts the wire format's bytes instead of building the
// proto message; a test holds it equal to proto.Size.
func SerializedSize(m Message) int {
	n := 0
	if len(m.Data) > 0 {
		n += protowire.SizeTag(pubsubDataField) + protowire.SizeBytes(len(m.Data))
	}
	for k, v := range m.Attributes {
		// A map entry is a nested message holding key (1) and value (2), both
		// always written.
		entry := protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
		n += protowire.SizeTag(pubsubAttributesField) + protowire.SizeBytes(entry)
	}
	if m.OrderingKey != "" {
		n += protowire.SizeTag(pubsubOrderingKeyField) + protowire.SizeBytes(len(m.OrderingKey))
	}
	return n
}

// Field numbers of google.pubsub.v1.PubsubMessage.
const (
	pubsubDataField        = 1
	pubsubAttributesField  = 2
	pubsubOrderingKeyField = 5
)

// MaxMessageSize is the largest SerializedSize the client sends to topic:
// it rejects a bigger message with pubsub.ErrOversizedMessage, because one
// publish request holds at most pubsub.MaxPublishRequestBytes including
// the topic name and the repeated field's framing (publisher.go,
// initBundler).
func MaxMessageSize(topic Topic) int {
	nameLen := len("projects/") + len(topic.Project) + len("/topics/") + len(topic.ID) // len(topic.String()), without building it per message
	return pubsub.MaxPublishRequestBytes - (1 + protowire.SizeVarint(uint64(nameLen)) + nameLen) - 5
}
