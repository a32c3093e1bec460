package sink

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Pub/Sub's per-message limits are stated once, in model (limits.go), for
// the sink and the dead-letter writer. The sink checks them before sending,
// in the writer, so that one bad message is routed on its own instead of
// failing, or being isolated out of, the batch it would have joined.
//
// messageSize is m's serialized size as the client counts it; the in-flight
// byte cap counts this.
func messageSize(m model.Message) int { return model.SerializedSize(m) }

// maxQuoted bounds how much of a key (an attribute's, an ordering key)
// errors and logs quote.
const maxQuoted = 64

// maxMessageSize is the largest message the client sends to topic. With
// ordering, the client's rejection of a bigger one would also pause the
// message's key, which is why the sink checks it first.
func maxMessageSize(topic model.Topic) int { return model.MaxMessageSize(topic) }

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
	if n := len(m.Attributes); n > model.MaxAttributes {
		why = append(why, fmt.Sprintf("it has %d attributes, over Pub/Sub's %d", n, model.MaxAttributes))
	}
	keys := make([]string, 0, len(m.Attributes))
	for k := range m.Attributes {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a stable message for a stable input
	for _, k := range keys {
		v := m.Attributes[k]
		q := fmt.Sprintf("%q", text.Truncate(k, maxQuoted))
		if problem := model.AttributeKeyProblem(k); problem != "" {
			why = append(why, fmt.Sprintf("attribute key %s %s", q, problem))
		}
		switch {
		case !utf8.ValidString(v):
			why = append(why, fmt.Sprintf("the value of attribute %s is not valid UTF-8", q))
		case len(v) > model.MaxAttributeValueBytes:
			why = append(why, fmt.Sprintf("the value of attribute %s is %d bytes, over Pub/Sub's %d", q, len(v), model.MaxAttributeValueBytes))
		}
	}
	if k := m.OrderingKey; !utf8.ValidString(k) {
		why = append(why, "its ordering key is not valid UTF-8")
	} else if len(k) > model.MaxOrderingKeyBytes {
		why = append(why, fmt.Sprintf("its ordering key is %d bytes, over Pub/Sub's %d", len(k), model.MaxOrderingKeyBytes))
	}
	if len(why) == 0 {
		return nil
	}
	return status.Error(codes.InvalidArgument, "the message breaks Pub/Sub's limits: "+strings.Join(why, "; "))
}
