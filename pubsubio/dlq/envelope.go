package dlq

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The envelope is how a FailedMessage travels on a dead-letter topic
// (Write publishes it, Decode reads it back). The message's data is the
// original payload, untouched; everything else is attributes, so a
// subscription can filter dead letters by stage, origin or code without
// parsing anything.
//
// Every attribute pubsubio sets starts with "dlq."; the original message's
// attributes follow under OriginalAttributePrefix, so neither can collide
// with the other (an original "dlq.stage" travels as "dlq.attr.dlq.stage").
// Attributes whose value would be empty are not set.
const (
	// AttrEnvelope marks a dead letter and holds the envelope's version,
	// EnvelopeVersion. Decode refuses a message without it.
	AttrEnvelope = "dlq.envelope"
	// AttrStage is FailedMessage.Stage: decode, late, validate or publish.
	AttrStage = "dlq.stage"
	// AttrSubscription is where a source failure came from, the full name
	// projects/P/subscriptions/S.
	AttrSubscription = "dlq.subscription"
	// AttrTopic is where a sink failure was going, projects/P/topics/T.
	AttrTopic = "dlq.topic"
	// AttrCode is the gRPC status code name, e.g. INVALID_ARGUMENT.
	AttrCode = "dlq.code"
	// AttrError is the failure's text, at most MaxErrorBytes bytes (cut on
	// a character boundary and ended with "..." when longer), valid UTF-8.
	AttrError = "dlq.error"
	// AttrTime is when the failure was observed, RFC 3339 in UTC with
	// nanoseconds.
	AttrTime = "dlq.time"
	// AttrAttempts is FailedMessage.Attempts in decimal.
	AttrAttempts = "dlq.attempts"
	// AttrMessageID is the original message's ID, when it had one.
	AttrMessageID = "dlq.message_id"
	// AttrOrderingKey is the original message's ordering key. The dead
	// letter itself is published without one: dead letters need no order,
	// and an ordered publish that failed would pause the key.
	AttrOrderingKey = "dlq.ordering_key"
	// AttrPublishTime is when Pub/Sub accepted the original message (source
	// failures), RFC 3339 in UTC with nanoseconds.
	AttrPublishTime = "dlq.publish_time"
	// AttrDeliveryAttempt is the original message's delivery attempt as
	// Pub/Sub reported it, in decimal.
	AttrDeliveryAttempt = "dlq.delivery_attempt"
	// AttrOmitted is set only when the envelope could not carry the whole
	// original within Pub/Sub's limits; it lists what is missing and why
	// (see Encode).
	AttrOmitted = "dlq.omitted"
	// OriginalAttributePrefix prefixes each of the original message's
	// attributes: the original "k" travels as "dlq.attr.k".
	OriginalAttributePrefix = "dlq.attr."
)

// EnvelopeVersion is the AttrEnvelope value of the envelope this package
// writes and reads.
const EnvelopeVersion = "1"

// maxQuotedKey bounds how much of an attribute key AttrOmitted quotes.
const maxQuotedKey = 64

// Encode returns the envelope of f for a dead-letter topic: the message
// Write publishes to topic. It never fails: what Pub/Sub's limits do not
// let it carry is left out and listed in AttrOmitted, so one dead letter
// can never fail the batch it is published in.
//
//   - The error text is cut to MaxErrorBytes and made valid UTF-8.
//   - An original attribute is carried unless its prefixed key would exceed
//     Pub/Sub's 256 bytes, its value its 1,024 bytes, or either is not valid
//     UTF-8 (the original may have been dead-lettered for exactly that).
//   - At most Pub/Sub's 100 attributes in all: originals are taken in key
//     order until the envelope's own attributes and AttrOmitted fill the
//     rest, and the count left out is listed.
//   - An ordering key (or another value) that is not a valid attribute
//     value is left out.
//   - A payload too large to publish with the envelope's attributes (an
//     original rejected for its size) is left out, its size listed.
func Encode(f FailedMessage, topic model.Topic) model.Message {
	out := encode(f, topic, false)
	if model.SerializedSize(out) > model.MaxMessageSize(topic) {
		out = encode(f, topic, true)
	}
	return out
}

// encode builds the envelope, leaving the payload out when withoutData is
// set.
func encode(f FailedMessage, topic model.Topic, withoutData bool) model.Message {
	m := f.Message
	e := envelope{attrs: map[string]string{AttrEnvelope: EnvelopeVersion}}
	out := model.Message{Data: m.Data, Attributes: e.attrs, Topic: topic}
	if withoutData {
		out.Data = nil
		e.omit("data (%d bytes): too large to publish with the envelope", len(m.Data))
	}
	e.setStage(f.Stage)
	if !f.Subscription.IsZero() {
		e.setName(AttrSubscription, f.Subscription.Project, f.Subscription.ID, f.Subscription.String())
	}
	if !f.Topic.IsZero() {
		e.setName(AttrTopic, f.Topic.Project, f.Topic.ID, f.Topic.String())
	}
	e.set(AttrCode, f.Code)
	if f.Error != "" {
		e.attrs[AttrError] = cleanError(f.Error)
	}
	e.setTime(AttrTime, f.Time)
	e.setCount(AttrAttempts, f.Attempts)
	e.set(AttrMessageID, m.ID)
	e.set(AttrOrderingKey, m.OrderingKey)
	e.setTime(AttrPublishTime, m.PublishTime)
	e.setCount(AttrDeliveryAttempt, m.DeliveryAttempt)
	e.originals(m.Attributes) // last: it needs to know whether AttrOmitted is coming
	if len(e.omitted) > 0 {
		e.attrs[AttrOmitted] = text.Truncate(strings.Join(e.omitted, "; "), model.MaxAttributeValueBytes)
	}
	return out
}

// cleanError is text as an attribute value: valid UTF-8 (invalid bytes
// replaced) and at most MaxErrorBytes. Only a prefix is cleaned, so a
// megabyte-long error costs no more than a short one.
func cleanError(msg string) string {
	if len(msg) > 4*MaxErrorBytes {
		msg = msg[:4*MaxErrorBytes] // a rune cut here is replaced, then cut off
	}
	return text.Truncate(strings.ToValidUTF8(msg, "\uFFFD"), MaxErrorBytes)
}

// envelope accumulates the attributes of one dead letter and what they
// leave out.
type envelope struct {
	attrs   map[string]string
	omitted []string
}

func (e *envelope) omit(format string, args ...any) {
	e.omitted = append(e.omitted, fmt.Sprintf(format, args...))
}

// fits reports whether v is a value Pub/Sub accepts for an attribute.
func fits(v string) bool {
	return len(v) <= model.MaxAttributeValueBytes && utf8.ValidString(v)
}

func (e *envelope) set(key, v string) {
	switch {
	case v == "":
	case fits(v):
		e.attrs[key] = v
	default:
		e.omit("%s (%d bytes): not a valid attribute value (at most %d bytes of UTF-8)", key, len(v), model.MaxAttributeValueBytes)
	}
}

// setName sets a resource name, unless a "/" inside project or id would
// make it split differently when Decode reads it back (such a name was never
// a valid one; found by FuzzEncodeDecode).
func (e *envelope) setName(key, project, id, name string) {
	if strings.Contains(project, "/") || strings.Contains(id, "/") {
		e.omit("%s (%d bytes): a project or ID containing \"/\" is not a resource name", key, len(name))
		return
	}
	e.set(key, name)
}

// setTime sets t in RFC 3339, which has four-digit years only: a time
// outside years 0-9999 in UTC would make an attribute Decode cannot parse
// (found by FuzzDecode), so it is left out instead.
func (e *envelope) setTime(key string, t time.Time) {
	if t.IsZero() {
		return
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		e.omit("%s: year %d is outside RFC 3339's 0-9999", key, y)
		return
	}
	e.attrs[key] = t.UTC().Format(time.RFC3339Nano)
}

// knownStages names the stages pubsubio writes, for errors.
var knownStages = fmt.Sprintf("%q, %q, %q or %q", StageDecode, StageLate, StageValidate, StagePublish)

// setStage sets one of the stages pubsubio writes; another, which only a
// FailedMessage built by hand has, is left out, and Decode reads its
// absence only with that listed.
func (e *envelope) setStage(s FailureStage) {
	if !s.known() {
		e.omit("%s %q: not one of %s", AttrStage, text.Truncate(string(s), maxQuotedKey), knownStages)
		return
	}
	e.attrs[AttrStage] = string(s)
}

// setCount sets a count; a negative one is left out.
func (e *envelope) setCount(key string, n int) {
	switch {
	case n < 0:
		e.omit("%s %d: negative", key, n)
	case n > 0:
		e.attrs[key] = strconv.Itoa(n)
	}
}

// originals adds the original attributes that fit, in key order.
func (e *envelope) originals(attrs map[string]string) {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var carry []string
	for _, k := range keys {
		v := attrs[k]
		q := strconv.Quote(text.Truncate(k, maxQuotedKey))
		switch {
		case !utf8.ValidString(k) || len(OriginalAttributePrefix)+len(k) > model.MaxAttributeKeyBytes:
			e.omit("attribute %s: key of %d bytes, not valid UTF-8 or over %d with the prefix %q", q, len(k), model.MaxAttributeKeyBytes, OriginalAttributePrefix)
		case !fits(v):
			e.omit("attribute %s: value of %d bytes, not valid UTF-8 or over %d", q, len(v), model.MaxAttributeValueBytes)
		default:
			carry = append(carry, k)
		}
	}
	room := model.MaxAttributes - len(e.attrs)
	if len(e.omitted) > 0 || len(carry) > room {
		room-- // for AttrOmitted
	}
	if len(carry) > room {
		e.omit("%d attributes from %s on: over Pub/Sub's %d attributes per message", len(carry)-room, strconv.Quote(text.Truncate(carry[room], maxQuotedKey)), model.MaxAttributes)
		carry = carry[:room]
	}
	for _, k := range carry {
		e.attrs[OriginalAttributePrefix+k] = attrs[k]
	}
}

// ErrNotDeadLetter is wrapped by every error Decode returns: the message
// has no envelope this pubsubio reads, or a malformed one. A consumer of a
// dead-letter topic that other publishers share can skip such messages
// with errors.Is.
var ErrNotDeadLetter = errors.New("not a dead letter this pubsubio reads")

// Decode returns the FailedMessage an envelope carries: the inverse of
// Encode for everything Encode carried. What the envelope lists in
// AttrOmitted is missing from the result, and the error text is as long as
// it was published. Message.Topic and Message.Subscription are not carried
// (Topic and Subscription say where the message was going or came from;
// FailedMessage.Original puts them back). Attributes that are neither the
// envelope's nor original ones (say, added by a later publisher) are
// ignored.
//
// m is a message read from the dead-letter topic; with the client library,
// pass model.Message{Data: msg.Data, Attributes: msg.Attributes}. An error
// wraps ErrNotDeadLetter and names the attribute that is missing or
// malformed.
func Decode(m model.Message) (FailedMessage, error) {
	a := m.Attributes
	switch v, ok := a[AttrEnvelope]; {
	case !ok:
		return FailedMessage{}, fmt.Errorf("dlq.Decode: %w: it has no %s attribute", ErrNotDeadLetter, AttrEnvelope)
	case v != EnvelopeVersion:
		return FailedMessage{}, fmt.Errorf("dlq.Decode: %w: %s %q is another version (it reads %q); decode it with the pubsubio that wrote it", ErrNotDeadLetter, AttrEnvelope, v, EnvelopeVersion)
	}
	var errs []error
	bad := func(key string, err error) { errs = append(errs, fmt.Errorf("%s %q: %w", key, a[key], err)) }
	f := FailedMessage{
		Stage: FailureStage(a[AttrStage]),
		Code:  a[AttrCode],
		Error: a[AttrError],
		Message: model.Message{
			ID:          a[AttrMessageID],
			Data:        m.Data,
			OrderingKey: a[AttrOrderingKey],
		},
	}
	if v, ok := a[AttrSubscription]; ok {
		project, id, err := splitName(v, "subscriptions")
		if err != nil {
			bad(AttrSubscription, err)
		}
		f.Subscription = model.SubscriptionOf(project, id)
	}
	if v, ok := a[AttrTopic]; ok {
		project, id, err := splitName(v, "topics")
		if err != nil {
			bad(AttrTopic, err)
		}
		f.Topic = model.TopicOf(project, id)
	}
	parseTime := func(key string, into *time.Time) {
		if v, ok := a[key]; ok {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				bad(key, err)
			}
			*into = t
		}
	}
	parseCount := func(key string, into *int) {
		if v, ok := a[key]; ok {
			n, err := strconv.Atoi(v)
			if err == nil && n < 0 {
				err = errors.New("a count cannot be negative")
			}
			if err != nil {
				bad(key, err)
			}
			*into = n
		}
	}
	switch v, ok := a[AttrStage]; {
	case ok && !FailureStage(v).known():
		bad(AttrStage, fmt.Errorf("not one of %s", knownStages))
	case !ok && !omits(a[AttrOmitted], AttrStage):
		errs = append(errs, fmt.Errorf("%s is missing, and %s does not say it was left out", AttrStage, AttrOmitted))
	}
	parseTime(AttrTime, &f.Time)
	parseCount(AttrAttempts, &f.Attempts)
	parseTime(AttrPublishTime, &f.Message.PublishTime)
	parseCount(AttrDeliveryAttempt, &f.Message.DeliveryAttempt)
	for k, v := range a {
		if orig, ok := strings.CutPrefix(k, OriginalAttributePrefix); ok {
			if f.Message.Attributes == nil {
				f.Message.Attributes = map[string]string{}
			}
			f.Message.Attributes[orig] = v
		}
	}
	if err := errors.Join(errs...); err != nil {
		return FailedMessage{}, fmt.Errorf("dlq.Decode: %w: message %q is malformed: %w", ErrNotDeadLetter, m.ID, err)
	}
	return f, nil
}

// omits reports whether omitted, an AttrOmitted value, lists key as left
// out: one of its "; "-separated entries starts with the key and a space,
// as the envelope's omit writes them.
func omits(omitted, key string) bool {
	for _, entry := range strings.Split(omitted, "; ") {
		if strings.HasPrefix(entry, key+" ") {
			return true
		}
	}
	return false
}

// splitName splits "projects/P/<collection>/ID" without validating P and
// ID: a dead letter records the name it was given, valid or not.
func splitName(name, collection string) (project, id string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != collection {
		return "", "", fmt.Errorf("not a name of the form projects/PROJECT/%s/ID", collection)
	}
	return parts[1], parts[3], nil
}
