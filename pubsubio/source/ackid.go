package source

import (
	"reflect"
	"sync"

	"cloud.google.com/go/pubsub/v2"
)

// ackIDOf returns the ack ID of a message received by the client, or "" if
// it cannot be read. The client keeps the ack ID unexported, but a residual
// that resumes in another worker process can ack only with the Acknowledge
// RPC, which needs it. The field path (Message.ackh -> *psAckHandler.ackID)
// is pinned by a test against a real server, so a client upgrade that moves
// it fails loudly; at runtime a missing ID only disables cross-process acks
// for that message (it is redelivered instead: at-least-once holds).
//
// It runs once per message: the field lookups by name are done once per
// type and kept (reflect's FieldByName walks the struct every call).
func ackIDOf(m *pubsub.Message) string {
	if m == nil || ackHandlerField == nil {
		return ""
	}
	h, err := reflect.ValueOf(m).Elem().FieldByIndexErr(ackHandlerField)
	if err != nil || h.IsNil() {
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
	index := ackIDField(impl.Type())
	if index == nil {
		return ""
	}
	id, err := impl.FieldByIndexErr(index)
	if err != nil {
		return ""
	}
	return id.String()
}

// ackHandlerField is the index of Message.ackh, nil if the client has no
// such interface field.
var ackHandlerField = func() []int {
	f, ok := reflect.TypeFor[pubsub.Message]().FieldByName("ackh")
	if !ok || f.Type.Kind() != reflect.Interface {
		return nil
	}
	return f.Index
}()

// ackIDFields caches ackIDField by handler type.
var ackIDFields sync.Map // reflect.Type -> []int (nil: no string ackID field)

// ackIDField is the index of the string field ackID of the handler struct
// type t, nil if it has none.
func ackIDField(t reflect.Type) []int {
	if v, ok := ackIDFields.Load(t); ok {
		return v.([]int)
	}
	var index []int
	if f, ok := t.FieldByName("ackID"); ok && f.Type.Kind() == reflect.String {
		index = f.Index
	}
	ackIDFields.Store(t, index)
	return index
}
