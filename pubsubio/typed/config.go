package typed

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Encoding is how an Avro or Protocol Buffer value is written: the
// encoding a Pub/Sub topic with a schema declares.
type Encoding string

const (
	// EncodingBinary is the format's binary encoding.
	EncodingBinary Encoding = "BINARY"
	// EncodingJSON is the format's JSON encoding.
	EncodingJSON Encoding = "JSON"
)

// DefaultEncoding is used when Encoding is unset: binary for Avro and
// Protocol Buffers (compact, and what schema topics are usually created
// with), JSON for model.FormatJSON, which has no other.
const DefaultEncoding = EncodingBinary

// DecodeConfig configures Decode. Format is required; every zero field
// takes the default documented on it. It is validated at graph
// construction, against the element type.
type DecodeConfig struct {
	// Format is what payloads hold: model.FormatJSON (encoding/json),
	// model.FormatAvro or model.FormatProtobuf. Required. Not model.FormatJSON
	// for a topic with a schema: Pub/Sub's JSON encoding of an Avro or
	// Protocol Buffer schema is that format's own JSON, which model.FormatAvro
	// and model.FormatProtobuf read and write with EncodingJSON.
	Format model.Format

	// Encoding is the encoding of an Avro or Protocol Buffer payload
	// whose message does not say: a message from a topic with a schema
	// carries the googclient_schemaencoding attribute, which wins. If
	// zero, DefaultEncoding (BINARY) is used; model.FormatJSON accepts only
	// EncodingJSON or zero.
	Encoding Encoding

	// AvroSchema is the writer's Avro schema (its JSON), for messages that
	// do not name a schema revision; messages that do are decoded with that
	// revision, fetched from Pub/Sub's schema service. Its top level must
	// be a record that the element type can hold; that is checked at
	// construction. model.FormatAvro needs AvroSchema or Topic; other formats
	// refuse it.
	AvroSchema string

	// Topic, when set, is the topic the messages were published to. Each
	// instance of the decoding DoFn reads its schema settings in its Setup,
	// before its first bundle, over a connection of its own (a worker may
	// run several instances), and fails, naming the topic, its schema and
	// encoding, when they do not match Format and Encoding. With model.FormatAvro
	// and no AvroSchema, its schema is the writer's schema of messages that
	// name no revision.
	Topic model.Topic

	// DecodePolicy is what happens to a message that does not decode:
	// model.DecodeFail (default) fails the bundle naming the message (the
	// read then gives it back, and Pub/Sub redelivers it),
	// model.DecodeDrop counts it in typed_decode_failures and drops it,
	// model.DecodeDeadLetter emits it on the dead-letter output (stage
	// decode). model.DecodeNack is refused: the read has already emitted
	// the message, and it is acked once the read's bundle commits, so
	// there is nothing left to nack; set it on the read's own Format
	// check instead, or use DecodeDeadLetter.
	DecodePolicy model.DecodePolicy

	// KeepMessage makes Decode emit KV<Message, T> instead of T: each value
	// with the message it came from (ID, attributes, ordering key, publish
	// time, subscription), whose Data is cleared since the value holds it.
	// Off by default: most pipelines need only the value, and the message
	// doubles the bytes every downstream step moves.
	KeepMessage bool

	// Connection says where and as whom the schema service is reached:
	// for Topic's settings and for the schema revisions messages name.
	// Nothing connects unless one of them is needed.
	Connection connection.Settings
}

// EncodeConfig configures Encode. Format is required; every zero field
// takes the default documented on it. It is validated at graph
// construction, against the element type.
type EncodeConfig struct {
	// Format is what payloads hold: model.FormatJSON (encoding/json),
	// model.FormatAvro or model.FormatProtobuf. Required. Not model.FormatJSON
	// for a topic with a schema: Pub/Sub's JSON encoding of an Avro or
	// Protocol Buffer schema is that format's own JSON, which model.FormatAvro
	// and model.FormatProtobuf read and write with EncodingJSON.
	Format model.Format

	// Encoding is how Avro and Protocol Buffer values are written. If
	// zero, DefaultEncoding (BINARY) is used; model.FormatJSON accepts only
	// EncodingJSON or zero. With a Topic that has a schema it must be the
	// topic's encoding.
	Encoding Encoding

	// AvroSchema is the Avro schema (its JSON) values are written with.
	// Every exported field of the element type must map to one of its
	// record's fields, and every field of the record without a default to
	// a field of the type; that is checked at construction. If zero,
	// Topic's schema is used (its newest revision the topic accepts),
	// read and checked in each DoFn instance's Setup. model.FormatAvro needs
	// AvroSchema or Topic; other formats refuse it.
	AvroSchema string

	// Topic, when set, is where the encoded messages go: Encode sets each
	// message's Topic to it, so pubsubio.Write sends them there whatever
	// its default. Each instance of the encoding DoFn reads its schema
	// settings in its Setup, before its first bundle, over a connection of
	// its own (a worker may run several instances), and fails, naming the
	// topic, its schema and encoding, when they do not match Format and
	// Encoding, or when AvroSchema is none of the schema's revisions that
	// the topic accepts (from its FirstRevisionId to its LastRevisionId).
	Topic model.Topic

	// FailurePolicy is what happens to a value that cannot be encoded (an
	// int too large for an Avro int, an enum symbol the schema lacks,
	// invalid UTF-8 in a proto3 string): model.PolicyFail (default) fails
	// the bundle, model.PolicyDrop logs, counts and drops it,
	// model.PolicyDeadLetter emits it on the dead-letter output (stage
	// validate), its Data the value rendered by encoding/json.
	FailurePolicy model.FailurePolicy

	// Connection says where and as whom the schema service is reached for
	// Topic's settings. Nothing connects without a Topic.
	Connection connection.Settings
}

// payload is what decoding and encoding share of a configuration: what a
// payload holds and where its schema comes from.
type payload struct {
	Format     model.Format
	Encoding   Encoding
	AvroSchema string
	Topic      model.Topic
	Connection connection.Settings
}

func (cfg DecodeConfig) payload() payload {
	return payload{cfg.Format, cfg.Encoding, cfg.AvroSchema, cfg.Topic, cfg.Connection}
}

func (cfg EncodeConfig) payload() payload {
	return payload{cfg.Format, cfg.Encoding, cfg.AvroSchema, cfg.Topic, cfg.Connection}
}

// withDefaults fills in the defaults of p and returns every problem with
// it, each naming the option and the value.
func (p *payload) withDefaults() []error {
	if p.Format == model.FormatJSON {
		construct.Default(&p.Encoding, EncodingJSON)
	}
	construct.Default(&p.Encoding, DefaultEncoding)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch p.Format {
	case model.FormatJSON, model.FormatAvro, model.FormatProtobuf:
	case "":
		bad("Format is required: %q, %q or %q", model.FormatJSON, model.FormatAvro, model.FormatProtobuf)
	case model.FormatText, model.FormatBytes:
		bad("Format %q holds no typed value (it is for Records and a read's check); use %q, %q or %q", p.Format, model.FormatJSON, model.FormatAvro, model.FormatProtobuf)
	default:
		bad("Format %q is unknown; use %q, %q or %q", p.Format, model.FormatJSON, model.FormatAvro, model.FormatProtobuf)
	}
	switch {
	case p.Encoding != EncodingBinary && p.Encoding != EncodingJSON:
		bad("Encoding %q is unknown; use %q or %q", p.Encoding, EncodingBinary, EncodingJSON)
	case p.Format == model.FormatJSON && p.Encoding != EncodingJSON:
		bad("Encoding %q does not apply to Format %s, which is always JSON; leave it unset", p.Encoding, model.FormatJSON)
	}
	switch {
	case p.Format == model.FormatAvro && p.AvroSchema == "" && p.Topic.IsZero():
		bad("Format %s needs the writer's schema: set AvroSchema, or Topic to take it from the topic's schema", model.FormatAvro)
	case p.Format != model.FormatAvro && p.AvroSchema != "":
		bad("AvroSchema is set, but Format is %q; it applies only to Format %s", p.Format, model.FormatAvro)
	}
	if !p.Topic.IsZero() {
		if err := p.Topic.Validate(); err != nil {
			bad("Topic: %w", err)
		}
	}
	if err := p.Connection.Validate(); err != nil {
		bad("Connection: %w", err)
	}
	return errs
}

// withDefaults returns cfg with its defaults filled in, validated for
// elements of type t.
func (cfg DecodeConfig) withDefaults(t reflect.Type) (DecodeConfig, error) {
	construct.Default(&cfg.DecodePolicy, model.DecodeFail)
	own := policyProblem("DecodePolicy", cfg.DecodePolicy, model.DecodeFail, model.DecodeDrop, model.DecodeDeadLetter)
	if cfg.DecodePolicy == model.DecodeNack {
		own = fmt.Errorf("DecodePolicy %s cannot apply after the read: the read emitted the message and acks it once its bundle commits, so there is nothing left to nack; use %s or %s here, or set %s on the read (its Format check) for the subscription's dead-letter policy",
			model.DecodeNack, model.DecodeDeadLetter, model.DecodeFail, model.DecodeNack)
	}
	var err error
	cfg.Encoding, err = validate(cfg.payload(), t, decoding, own)
	return cfg, err
}

// withDefaults returns cfg with its defaults filled in, validated for
// elements of type t.
func (cfg EncodeConfig) withDefaults(t reflect.Type) (EncodeConfig, error) {
	construct.Default(&cfg.FailurePolicy, model.PolicyFail)
	own := policyProblem("FailurePolicy", cfg.FailurePolicy, model.PolicyFail, model.PolicyDrop, model.PolicyDeadLetter)
	var err error
	cfg.Encoding, err = validate(cfg.payload(), t, encoding, own)
	return cfg, err
}

// policyProblem returns why policy, the value of option, is none of
// known, or nil.
func policyProblem[P ~string](option string, policy P, known ...P) error {
	if slices.Contains(known, policy) {
		return nil
	}
	quoted := make([]string, len(known))
	for i, k := range known {
		quoted[i] = strconv.Quote(string(k))
	}
	return fmt.Errorf("%s %q is unknown; use %s or %s", option, policy, strings.Join(quoted[:len(quoted)-1], ", "), quoted[len(quoted)-1])
}

// validate fills in p's defaults and returns its encoding and, as one
// construction error of dir's API, p's problems, own (the policy's), and,
// when there are none, why values of t cannot be what p's payloads hold.
func validate(p payload, t reflect.Type, dir direction, own error) (Encoding, error) {
	errs := p.withDefaults()
	if own != nil {
		errs = append(errs, own)
	}
	if len(errs) == 0 {
		errs = checkType(p, t, dir)
	}
	return p.Encoding, construct.Invalid(apiOf(dir), errs...)
}

// direction says whether a type is checked for decoding or for encoding,
// which map an Avro record differently (avroplan.go).
type direction bool

const (
	decoding direction = false
	encoding direction = true
)

// checkType returns why values of t cannot be what p's payloads hold.
func checkType(p payload, t reflect.Type, dir direction) []error {
	if t == nil {
		return []error{errors.New("the element type is nil; pass reflect.TypeOf of a value of it")}
	}
	var errs []error
	if err := checkRegistered(t); err != nil {
		errs = append(errs, err)
	}
	var err error
	switch p.Format {
	case model.FormatJSON:
		err = checkJSONType(t)
	case model.FormatProtobuf:
		err = checkProtoType(t)
	case model.FormatAvro:
		err = checkAvroType(t, p.AvroSchema, dir)
	}
	if err != nil {
		errs = append(errs, err)
	}
	return errs
}
