// Package record is the record view of pubsubio messages: one JSON object
// per message, in the shape faucet-style consumers read (faucet's Pub/Sub
// source emits the same):
//
//	{
//	  "data": ...,                      // the payload, decoded per Format
//	  "__attributes": {"k": "v"},       // key configurable: AttributesKey
//	  "message_id": "123456789",
//	  "ordering_key": "order-42",       // omitted when empty
//	  "publish_time_millis": 1716700000123
//	}
//
// A message not read from Pub/Sub (no ID, no publish time) has an empty
// message_id and no publish_time_millis.
//
// Format says how the payload becomes "data": FormatJSON embeds it as JSON
// (compacted onto one line), FormatText as a JSON string, FormatBytes as a
// base64 (standard, padded) string. The keys come in that order, the
// attributes sorted by key, and no HTML escaping is applied, so a record is
// one line of plain JSON: ready for text files or a JSON column.
//
// A payload that does not hold the format (invalid JSON or UTF-8), or an
// attribute, ordering key or ID that is not UTF-8 (JSON would replace its
// bytes), does not become a record and is never dropped silently: Records returns it as
// a dead letter (dlq.FailedMessage, stage dlq.StageDecode, no gRPC code, the
// error saying what is wrong and where), which dlq.Write can publish to a
// dead-letter topic. FormatBytes accepts every payload.
package record

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Defaults; the reasons are on the Config fields.
const (
	DefaultFormat        = model.FormatJSON
	DefaultAttributesKey = "__attributes"
)

// The record's fixed keys, which AttributesKey may not take.
const (
	keyData        = "data"
	keyMessageID   = "message_id"
	keyOrderingKey = "ordering_key"
	keyPublishTime = "publish_time_millis"
)

// Config configures the record view. Every zero field takes the default
// documented on it; it is validated at graph construction.
type Config struct {
	// Format is what payloads hold: model.FormatJSON (default, faucet's
	// default value_format, because JSON consumers are who this view is
	// for), model.FormatText or model.FormatBytes.
	Format model.Format

	// AttributesKey is the record key of the attribute map (default
	// "__attributes", faucet's: a name no payload field is likely to have).
	// It may not be one of the record's other keys.
	AttributesKey string
}

// withDefaults returns cfg with every zero field set to its default and the
// whole configuration validated. Errors name the field and the value.
func (cfg Config) withDefaults() (Config, error) {
	construct.Default(&cfg.Format, DefaultFormat)
	construct.Default(&cfg.AttributesKey, DefaultAttributesKey)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := cfg.Format.Validate(); err != nil {
		bad("Format: %w", err)
	}
	// Go's encoding/json matches keys to fields case-insensitively, so a
	// key equal to one of the record's under case folding ("Data") would
	// reach a consumer's Data field.
	k := cfg.AttributesKey
	switch {
	case len(k) > maxAttributesKeyBytes:
		bad("AttributesKey of %d bytes is longer than %d; choose a short key, e.g. %q", len(k), maxAttributesKeyBytes, DefaultAttributesKey)
	case !utf8.ValidString(k):
		bad("AttributesKey %q is not valid UTF-8, so it cannot be a JSON key", k)
	case slices.ContainsFunc([]string{keyData, keyMessageID, keyOrderingKey, keyPublishTime}, func(own string) bool { return strings.EqualFold(k, own) }):
		bad("AttributesKey %q is one of the record's own keys (%s, %s, %s, %s) under case folding, as Go's JSON decoding matches them; choose another, e.g. %q",
			k, keyData, keyMessageID, keyOrderingKey, keyPublishTime, DefaultAttributesKey)
	}
	return cfg, construct.Invalid("pubsubio.Records", errs...)
}

// maxQuotedKey bounds how much of an attribute's key an error quotes.
const maxQuotedKey = 64

// maxAttributesKeyBytes bounds AttributesKey, which every record repeats:
// Pub/Sub's own limit on an attribute key.
const maxAttributesKeyBytes = 256

// Encoder turns messages into records under one validated Config.
type Encoder struct {
	cfg Config
	key []byte // AttributesKey, encoded
}

// NewEncoder returns the Encoder for cfg, or cfg's validation error.
func NewEncoder(cfg Config) (*Encoder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	writeJSON(&b, cfg.AttributesKey)
	return &Encoder{cfg: cfg, key: bytes.Clone(b.Bytes())}, nil
}

// Encode returns m's record, or why m's payload does not hold the format
// or a string of m is not UTF-8.
func (e *Encoder) Encode(m model.Message) ([]byte, error) {
	if err := e.cfg.Format.Check(m.Data); err != nil {
		return nil, err
	}
	if err := checkUTF8(m); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(m.Data)*4/3 + 128)
	b.WriteString(`{"` + keyData + `":`)
	switch e.cfg.Format {
	case model.FormatJSON:
		if err := json.Compact(&b, m.Data); err != nil { // Check accepted it
			return nil, fmt.Errorf("the payload is not JSON (format JSON): %w", err)
		}
	case model.FormatText:
		writeJSON(&b, string(m.Data))
	case model.FormatBytes:
		b.WriteByte('"')
		enc := base64.NewEncoder(base64.StdEncoding, &b)
		enc.Write(m.Data)
		enc.Close()
		b.WriteByte('"')
	}
	b.WriteByte(',')
	b.Write(e.key)
	b.WriteByte(':')
	if len(m.Attributes) == 0 {
		b.WriteString("{}")
	} else {
		writeJSON(&b, m.Attributes) // sorted by key
	}
	b.WriteString(`,"` + keyMessageID + `":`)
	writeJSON(&b, m.ID)
	if m.OrderingKey != "" {
		b.WriteString(`,"` + keyOrderingKey + `":`)
		writeJSON(&b, m.OrderingKey)
	}
	if !m.PublishTime.IsZero() {
		b.WriteString(`,"` + keyPublishTime + `":`)
		b.WriteString(strconv.FormatInt(m.PublishTime.UnixMilli(), 10))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// checkUTF8 says which string of m is not UTF-8: JSON would replace its
// bad bytes with U+FFFD, and the record would not say what m held.
// Messages read from Pub/Sub always pass; messages made in the pipeline
// may not.
func checkUTF8(m model.Message) error {
	bad := func(what, s string) error {
		if at := text.InvalidUTF8At(s); at >= 0 {
			return fmt.Errorf("%s is not valid UTF-8 (invalid byte at offset %d of %d), which a record, JSON, cannot hold", what, at, len(s))
		}
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m.Attributes)) {
		if err := bad("an attribute's key", k); err != nil {
			return err
		}
		if err := bad(fmt.Sprintf("attribute %q", text.Truncate(k, maxQuotedKey)), m.Attributes[k]); err != nil {
			return err
		}
	}
	return errors.Join(bad("the ordering key", m.OrderingKey), bad("the message ID", m.ID))
}

// writeJSON appends v, a string or a map of strings, as JSON without HTML
// escaping ("<" stays "<") and without the encoder's trailing newline.
func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings and maps of strings always encode
	b.Truncate(b.Len() - 1)
}
