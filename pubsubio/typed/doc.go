// Package typed turns Pub/Sub messages into Go values and Go values into
// messages: JSON, Avro and Protocol Buffers, aware of the schemas Pub/Sub
// keeps for topics.
//
// Decode takes a PCollection<pubsubio.Message> (what pubsubio.Read
// returns) and the element type T, as a reflect.Type, the way Beam Go's
// typed IOs take it (bigqueryio.Read, databaseio.Read), and returns a
// PCollection<T>. Encode takes a PCollection<T> and returns messages for
// pubsubio.Write. T must be registered with beam.RegisterType in an init
// function when it is a named type; construction refuses it otherwise,
// since a worker started from the staged binary would not know it.
//
// # Formats
//
//   - model.FormatJSON: encoding/json, into any type it handles.
//   - model.FormatProtobuf: google.golang.org/protobuf, into a generated
//     message, T being its pointer type; EncodingBinary (the wire format)
//     or EncodingJSON (protojson; fields T does not know are ignored, as
//     binary decoding keeps them aside).
//   - model.FormatAvro: github.com/linkedin/goavro/v2, EncodingBinary (a single
//     record, no container header, as Pub/Sub carries it) or EncodingJSON
//     (Avro's JSON encoding, unions as {"type": value}; goavro writes a
//     record's fields in no fixed order, which readers, matching them by
//     name, do not mind). The writer's
//     schema is AvroSchema, or the topic's, or, for a message that names
//     one, the schema revision it names (below).
//
// # Avro records and Go structs
//
// The schema's top level must be a record, and T a struct. A struct field
// maps to the record field its tag names (`avro:"name"`; `avro:"-"`
// leaves it out), else to the one with its name, else to the one whose
// name equals it ignoring case, if only one does. Unexported fields are
// left out; embedded ones are refused. Types map as follows, and every
// other pairing is refused at construction (or, for a revision fetched at
// run time, is a decode failure of its messages):
//
//	boolean                     bool
//	int                         int, int32, int64 (encoding checks the range)
//	long                        int, int64
//	float                       float32, float64 (encoded as float32)
//	double                      float64
//	string, enum                string (encoding checks the symbol)
//	bytes                       []byte
//	fixed                       []byte or [size]byte
//	array                       a slice of the items' type
//	map                         map[string]V of the values' type
//	record                      a struct, mapped the same way
//	["null", X] or [X, "null"]  *X, nil for null
//	[X]                         X
//	timestamp-millis, timestamp-micros, date   time.Time (UTC)
//	time-millis, time-micros    time.Duration
//
// Decimal and unions of several types besides null are not supported.
// Nor are records that contain themselves, directly or through other
// types: goavro reads a payload by recursion, one call per level of
// nesting, so a payload could nest such a record deep enough to overflow
// the stack and end the worker. Such a schema is refused at construction
// even when T leaves the field out, and a revision fetched at run time
// that has one makes its messages decode failures. Names resolve as Avro's
// specification says (namespaces, references to types defined earlier).
//
// Decoding with a schema known at construction needs every struct field
// to map to a field of the record: a field that maps to nothing is a
// typo, not a projection. Decoding with a revision a message names leaves
// a struct field the revision lacks at its zero value, since older
// revisions may predate it; a record field T lacks is skipped either way.
// Encoding needs every struct field to map to a record field (none is
// dropped silently), and every record field without a default to have a
// struct field.
//
// # Schemas
//
// Messages published to a topic with a schema carry the attributes
// googclient_schemaname, googclient_schemarevisionid and
// googclient_schemaencoding (SchemaNameAttribute and the others), set by
// Pub/Sub itself. Decode reads each such message in the encoding it names
// and, for Avro, with the revision it names, fetched from Pub/Sub's schema
// service once per process and element type and kept in a bounded cache
// (MaxCachedRevisions). A revision that does not exist, is not Avro, has
// a record that contains itself or does not fit T makes its messages
// decode failures, never a crash; a schema service that does not answer
// fails the bundle, whatever the policy, so an outage never sends a
// stream to the dead letters. A Protocol Buffer revision is not fetched:
// the generated type is the reader, and a newer revision's fields are
// kept as unknown fields.
//
// With Topic set, each instance of the DoFn reads the topic's schema
// settings in its Setup, before its first bundle, over a connection of
// its own (a worker may run several instances, and the runner may start
// more at any time), and fails, naming the topic, its schema and
// encoding, when Format or Encoding does not match them (model.FormatJSON never
// matches a topic with a schema: Pub/Sub's JSON encoding is the schema
// format's own); Encode also needs AvroSchema, when given, to be one of
// the schema's revisions that the topic accepts (from its FirstRevisionId
// to its LastRevisionId, by creation time). A Protocol Buffer schema's
// definition is not parsed: Pub/Sub validates every publish against it
// and refuses what does not conform, which pubsubio.Write reports as a
// publish failure.
// Encode never sets the schema attributes, and drops them from a message
// it keeps: Pub/Sub sets them on publish, and refuses them from a
// publisher (keys starting with "goog" are its own), as pubsubio.Write
// does. The emulator accepts them, replacing them with its own on a topic
// with a schema; pstest neither refuses nor sets them. Every call to the schema service goes
// through pubsubio/connection (Connection; never PUBSUB_EMULATOR_HOST)
// under Connection.RPCTimeout.
//
// # Failures
//
// A message that does not decode follows DecodeConfig.DecodePolicy, the
// read's policies: DecodeFail (default) fails the bundle naming the
// message, and the read gives it back; DecodeDrop counts it
// (typed_decode_failures) and drops it; DecodeDeadLetter emits it on the
// dead-letter output as a dlq.FailedMessage with stage decode, the
// subscription kept. DecodeNack is refused at construction: by then the
// read has emitted the message and acks it when its bundle commits.
//
// A value that does not encode follows EncodeConfig.FailurePolicy, the
// write's policies; under PolicyDeadLetter it is emitted with stage
// validate and code INVALID_ARGUMENT, its Data the value rendered by
// encoding/json for a person to read.
//
// # Metadata
//
// Decode emits each value at its message's event time (the publish time,
// or the read's TimestampAttribute). With KeepMessage it emits
// KV<pubsubio.Message, T> instead: the message's ID, attributes, ordering
// key, publish time and subscription beside the value, its Data cleared.
// Encode takes that KV too, and keeps the attributes (less the schema
// attributes), the ordering key and the topic of each message while
// replacing its Data, so a pipeline can read, change and republish typed
// values without losing what travelled with them.
package typed
