package sink

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Pub/Sub's per-message limits (https://cloud.google.com/pubsub/quotas,
// resource limits). The sink checks them before sending, in the writer, so
// that one bad message is routed on its own instead of failing, or being
// isolated out of, the batch it would have joined.
const (
	maxAttributes           = 100
	maxAttributeKeyBytes    = 256
	maxAttributeValueBytes  = 1024
	maxOrderingKeyBytes     = 1024
	reservedAttributePrefix = "goog"
)

// messageSize is m's serialized size, computed as the client computes it
// for its own accounting (publisher.go, Publish): the PubsubMessage with
// data, attributes and ordering key. The in-flight byte cap counts this.
func messageSize(m model.Message) int {
	return proto.Size(&pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey})
}

// maxMessageSize is the largest message the client sends to topic: it
// rejects a bigger one with ErrOversizedMessage, because one publish
// request holds at most MaxPublishRequestBytes including the topic name and
// the repeated field's framing (publisher.go, initBundler). With ordering,
// that rejection would also pause the message's key.
func maxMessageSize(topic model.Topic) int {
	name := topic.String()
	return pubsub.MaxPublishRequestBytes - (1 + protowire.SizeVarint(uint64(len(name))) + len(name)) - 5
}

// checkLimits returns why Pub/Sub would reject m, as an INVALID_ARGUMENT
// status naming every broken limit, or nil.
func checkLimits(topic model.Topic, m model.Message, size int) error {
	var why []string
	if len(m.Data) == 0 && len(m.Attributes) == 0 {
		why = append(why, "it has neither data nor attributes, and Pub/Sub needs at least one of them")
	}
	if limit := maxMessageSize(topic); size > limit {
		why = append(why, fmt.Sprintf("it is %d bytes serialized, over the %d a publish request to this topic can carry (Pub/Sub's 10 MB request limit)", size, limit))
	}
	if n := len(m.Attributes); n > maxAttributes {
		why = append(why, fmt.Sprintf("it has %d attributes, over Pub/Sub's %d", n, maxAttributes))
	}
	keys := make([]string, 0, len(m.Attributes))
	for k := range m.Attributes {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a stable message for a stable input
	for _, k := range keys {
		v := m.Attributes[k]
		q := fmt.Sprintf("%q", dlq.Truncate(k, 64))
		switch {
		case !utf8.ValidString(k):
			why = append(why, fmt.Sprintf("attribute key %s is not valid UTF-8", q))
		case len(k) > maxAttributeKeyBytes:
			why = append(why, fmt.Sprintf("attribute key %s is %d bytes, over Pub/Sub's %d", q, len(k), maxAttributeKeyBytes))
		case strings.HasPrefix(k, reservedAttributePrefix):
			why = append(why, fmt.Sprintf("attribute key %s starts with %q, which Pub/Sub reserves", q, reservedAttributePrefix))
		}
		switch {
		case !utf8.ValidString(v):
			why = append(why, fmt.Sprintf("the value of attribute %s is not valid UTF-8", q))
		case len(v) > maxAttributeValueBytes:
			why = append(why, fmt.Sprintf("the value of attribute %s is %d bytes, over Pub/Sub's %d", q, len(v), maxAttributeValueBytes))
		}
	}
	if k := m.OrderingKey; !utf8.ValidString(k) {
		why = append(why, "its ordering key is not valid UTF-8")
	} else if len(k) > maxOrderingKeyBytes {
		why = append(why, fmt.Sprintf("its ordering key is %d bytes, over Pub/Sub's %d", len(k), maxOrderingKeyBytes))
	}
	if len(why) == 0 {
		return nil
	}
	return status.Error(codes.InvalidArgument, "the message breaks Pub/Sub's limits: "+strings.Join(why, "; "))
}
