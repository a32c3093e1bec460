package model

import (
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
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
	// itself.
	ReservedAttributePrefix = "goog"
)

// SerializedSize is m's serialized size, computed as the client computes it
// for its own accounting (publisher.go, Publish): the PubsubMessage with
// data, attributes and ordering key.
func SerializedSize(m Message) int {
	return proto.Size(&pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey})
}

// MaxMessageSize is the largest SerializedSize the client sends to topic:
// it rejects a bigger message with pubsub.ErrOversizedMessage, because one
// publish request holds at most pubsub.MaxPublishRequestBytes including
// the topic name and the repeated field's framing (publisher.go,
// initBundler).
func MaxMessageSize(topic Topic) int {
	name := topic.String()
	return pubsub.MaxPublishRequestBytes - (1 + protowire.SizeVarint(uint64(len(name))) + len(name)) - 5
}
