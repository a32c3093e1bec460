package pubsubio

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/typed"
)

// The typed messages' values, re-exported from package typed, whose
// documentation holds the Avro field mapping and the schema checks.
type (
	// DecodeConfig configures Decode: every option, its default and why.
	DecodeConfig = typed.DecodeConfig
	// EncodeConfig configures Encode: every option, its default and why.
	EncodeConfig = typed.EncodeConfig
	// Encoding is EncodingBinary or EncodingJSON: how an Avro or Protocol
	// Buffer value is written, as a topic's schema settings say.
	Encoding = typed.Encoding
)

// Encodings (DecodeConfig.Encoding, EncodeConfig.Encoding).
const (
	// EncodingBinary (default) is the format's binary encoding.
	EncodingBinary = typed.EncodingBinary
	// EncodingJSON is the format's JSON encoding.
	EncodingJSON = typed.EncodingJSON
)

// The attributes Pub/Sub sets on every message published to a topic with a
// schema, which Decode reads each message by.
const (
	// SchemaNameAttribute holds the schema's name.
	SchemaNameAttribute = typed.SchemaNameAttribute
	// SchemaRevisionAttribute holds the revision the message was
	// validated against.
	SchemaRevisionAttribute = typed.SchemaRevisionAttribute
	// SchemaEncodingAttribute holds the encoding, JSON or BINARY.
	SchemaEncodingAttribute = typed.SchemaEncodingAttribute
)

// Decode turns msgs, a PCollection<Message>, into a PCollection<T> of the
// element type t (KV<Message, T> under cfg.KeepMessage), each value at its
// message's event time, and returns with them the dead letters, a
// PCollection<FailedMessage> with stage StageDecode under DecodePolicy
// DecodeDeadLetter. Messages that name a Pub/Sub schema revision are read
// with it. An invalid configuration, or a t the format cannot hold, panics
// at graph construction; TryDecode returns it as an error.
func Decode(s beam.Scope, cfg DecodeConfig, t reflect.Type, msgs beam.PCollection) (values, deadLetters beam.PCollection) {
	return typed.Decode(s, cfg, t, msgs)
}

// TryDecode is Decode returning the construction error instead of
// panicking.
func TryDecode(s beam.Scope, cfg DecodeConfig, t reflect.Type, msgs beam.PCollection) (values, deadLetters beam.PCollection, err error) {
	return typed.TryDecode(s, cfg, t, msgs)
}

// Encode turns values, a PCollection<T> (or KV<Message, T>, keeping each
// message's attributes and ordering key), into a PCollection<Message> for
// Write, and returns with them the dead letters, a
// PCollection<FailedMessage> with stage StageValidate under FailurePolicy
// PolicyDeadLetter. With cfg.Topic set, the topic's schema settings are
// checked before the first value. An invalid configuration, or an element
// type the format cannot hold, panics at graph construction; TryEncode
// returns it as an error.
func Encode(s beam.Scope, cfg EncodeConfig, values beam.PCollection) (msgs, deadLetters beam.PCollection) {
	return typed.Encode(s, cfg, values)
}

// TryEncode is Encode returning the construction error instead of
// panicking.
func TryEncode(s beam.Scope, cfg EncodeConfig, values beam.PCollection) (msgs, deadLetters beam.PCollection, err error) {
	return typed.TryEncode(s, cfg, values)
}
