package model

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
)

// Format says what a message's payload is expected to hold. The record
// view decodes by it, and a read checks payloads against it, for
// FormatBytes, FormatText and FormatJSON; typed payloads (package typed)
// are FormatJSON, FormatAvro or FormatProtobuf.
type Format string

const (
	// FormatBytes accepts any payload: nothing to decode, nothing can fail.
	FormatBytes Format = "BYTES"
	// FormatText accepts a payload that is valid UTF-8 text.
	FormatText Format = "TEXT"
	// FormatJSON accepts a payload that is one valid JSON value (an object,
	// an array, a string, a number, true, false or null) in UTF-8. An empty
	// payload is not JSON.
	FormatJSON Format = "JSON"
	// FormatAvro holds an Avro record, binary or in Avro's JSON encoding:
	// typed payloads only.
	FormatAvro Format = "AVRO"
	// FormatProtobuf holds a Protocol Buffer message, binary or in its
	// canonical JSON mapping: typed payloads only.
	FormatProtobuf Format = "PROTOBUF"
)

// Validate reports whether f is a format the record view and a read's
// check know, quoting it when it is not; the caller names the option.
func (f Format) Validate() error {
	switch f {
	case FormatBytes, FormatText, FormatJSON:
		return nil
	case FormatAvro, FormatProtobuf:
		return fmt.Errorf("%q is a typed payload format, for Decode and Encode; use %q, %q or %q here", string(f), FormatBytes, FormatText, FormatJSON)
	}
	return fmt.Errorf("%q is not a known format; use %q, %q or %q", string(f), FormatBytes, FormatText, FormatJSON)
}

// Check returns why data does not hold f, or nil. The reason names the
// format and where in the payload decoding failed; it never quotes the
// payload, which may be sensitive and is kept in the dead letter anyway.
func (f Format) Check(data []byte) error {
	switch f {
	case FormatBytes:
		return nil
	case FormatText:
		return checkUTF8(f, data)
	case FormatJSON:
		if err := checkUTF8(f, data); err != nil {
			return err
		}
		if len(data) == 0 {
			return errors.New("the payload is empty, which is not JSON (format JSON)")
		}
		if json.Valid(data) {
			return nil
		}
		var v json.RawMessage // only to learn why and where
		if err := json.Unmarshal(data, &v); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return fmt.Errorf("the payload is not JSON (format JSON): %w (at byte %d of %d)", err, se.Offset, len(data))
			}
			return fmt.Errorf("the payload is not JSON (format JSON): %w", err)
		}
		return nil
	}
	return f.Validate()
}

func checkUTF8(f Format, data []byte) error {
	at := text.InvalidUTF8At(data)
	if at < 0 {
		return nil
	}
	return fmt.Errorf("the payload is not valid UTF-8 (format %s): invalid byte at offset %d of %d", f, at, len(data))
}
