package pubsubio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/record"
)

// The record view's values, re-exported from the leaf packages.
type (
	// RecordConfig configures Records: every option, its default and why.
	RecordConfig = record.Config
	// Format says what payloads hold: FormatJSON, FormatText or
	// FormatBytes for Records and a read's check (ReadConfig.Format),
	// FormatJSON, FormatAvro or FormatProtobuf for Decode and Encode.
	Format = model.Format
)

// Payload formats.
const (
	// FormatJSON: one JSON value, in UTF-8 (encoding/json for Decode and
	// Encode).
	FormatJSON = model.FormatJSON
	// FormatText: UTF-8 text.
	FormatText = model.FormatText
	// FormatBytes: anything.
	FormatBytes = model.FormatBytes
	// FormatAvro: Avro records, into a Go struct (Decode and Encode).
	FormatAvro = model.FormatAvro
	// FormatProtobuf: Protocol Buffers, into a generated message, given
	// as its pointer type (Decode and Encode).
	FormatProtobuf = model.FormatProtobuf
)

// Records turns msgs, a PCollection<Message>, into JSON records
// (PCollection<string>) of the shape faucet-style consumers read:
// {data, __attributes, message_id, ordering_key, publish_time_millis},
// data decoded per cfg.Format (package record has the details). A message
// whose payload does not hold the format is returned in deadLetters, a
// PCollection<FailedMessage> with stage StageDecode, never dropped; pass it
// to WriteDeadLetters to publish it to a dead-letter topic. An invalid
// configuration panics at graph construction; TryRecords returns it.
func Records(s beam.Scope, cfg RecordConfig, msgs beam.PCollection) (records, deadLetters beam.PCollection) {
	return record.Records(s, cfg, msgs)
}

// TryRecords is Records returning the construction error instead of
// panicking.
func TryRecords(s beam.Scope, cfg RecordConfig, msgs beam.PCollection) (records, deadLetters beam.PCollection, err error) {
	return record.TryRecords(s, cfg, msgs)
}
