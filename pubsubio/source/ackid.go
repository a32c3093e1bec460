package source

import (
	"reflect"

	"cloud.google.com/go/pubsub/v2"
)

// ackIDOf returns the ack ID of a message received by the client, or "" if
// it cannot be read. The client keeps the ack ID unexported, but a residual
// that resumes in another worker process can ack only with the Acknowledge
// RPC, which needs it. The field path (Message.ackh -> *psAckHandler.ackID)
// is pinned by a test against a real server, so a client upgrade that moves
// it fails loudly; at runtime a missing ID only disables cross-process acks
// for that message (it is redelivered instead: at-least-once holds).
func ackIDOf(m *pubsub.Message) string {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return ""
	}
	h := v.Elem().FieldByName("ackh")
	if !h.IsValid() || h.Kind() != reflect.Interface || h.IsNil() {
		return ""
	}
	impl := h.Elem()
	if impl.Kind() == reflect.Pointer {
		if impl.IsNil() {
			return ""
		}
		impl = impl.Elem()
	}
	if impl.Kind() != reflect.Struct {
		return ""
	}
	id := impl.FieldByName("ackID")
	if !id.IsValid() || id.Kind() != reflect.String {
		return ""
	}
	return id.String()
}
