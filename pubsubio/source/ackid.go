package source

import (
	"reflect"
	"strings"
	"sync/atomic"

	"cloud.google.com/go/pubsub/v2"
)

// ackID is what a delivery is acked by: the ack ID Pub/Sub gave it, or,
// when the client's could not be read (clientAckID), a stand-in that only
// the held message can ack, in process.
type ackID string

// standInPrefix starts every stand-in ack ID; Pub/Sub's never contain ':'.
const standInPrefix = "message:"

// ackIDOf returns the ack ID of m, a message the client received.
func ackIDOf(m *pubsub.Message) ackID {
	if id := clientAckID(m); id != "" {
		return ackID(id)
	}
	return ackID(standInPrefix + m.ID)
}

// remote reports whether the Acknowledge and ModifyAckDeadline RPCs can
// take id: whether it is Pub/Sub's.
func (id ackID) remote() bool { return !strings.HasPrefix(string(id), standInPrefix) }

// ackIDStrings returns ids as restrictions carry them; nil if empty.
func ackIDStrings(ids []ackID) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// ackIDsFrom returns the ack IDs a restriction carries.
func ackIDsFrom(ids []string) []ackID {
	out := make([]ackID, len(ids))
	for i, id := range ids {
		out[i] = ackID(id)
	}
	return out
}

// remoteAckIDs returns the ids the RPCs can take, as strings.
func remoteAckIDs(ids []ackID) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id.remote() {
			out = append(out, string(id))
		}
	}
	return out
}

// clientAckID returns the ack ID of a message received by the client, or
// "" if it cannot be read. The client keeps the ack ID unexported, but a
// residual that resumes in another worker process can ack only with the
// Acknowledge RPC, which needs it. The field path (Message.ackh ->
// *psAckHandler.ackID) is pinned by a test against a real server, so a
// client upgrade that moves it fails loudly; at runtime a missing ID only
// disables cross-process acks for that message (it is redelivered
// instead: at-least-once holds). It runs once per message, so the field
// lookups are done once per type.
func clientAckID(m *pubsub.Message) string {
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

// handlerIndex is ackIDField's answer for one handler type.
type handlerIndex struct {
	t     reflect.Type
	index []int
}

// lastHandler caches ackIDField for the handler type it saw last: the
// client uses one, so a pointer comparison answers every later message
// (a map keyed by type would hash an interface per message, on a stack
// deep enough to make the callback's goroutine grow its stack).
var lastHandler atomic.Pointer[handlerIndex]

// ackIDField is the index of the string field ackID of the handler struct
// type t, nil if it has none.
func ackIDField(t reflect.Type) []int {
	if h := lastHandler.Load(); h != nil && h.t == t {
		return h.index
	}
	var index []int
	if f, ok := t.FieldByName("ackID"); ok && f.Type.Kind() == reflect.String {
		index = f.Index
	}
	lastHandler.Store(&handlerIndex{t: t, index: index})
	return index
}
