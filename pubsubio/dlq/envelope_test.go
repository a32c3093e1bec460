package dlq

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var dlqTopic = model.TopicOf("pubsubio-test", "dead-letters")

// withinLimits fails the test unless m is a message Pub/Sub accepts on
// dlqTopic: the limits the sink checks before sending (model's).
func withinLimits(t *testing.T, m model.Message) {
	t.Helper()
	if n := len(m.Attributes); n > model.MaxAttributes {
		t.Errorf("envelope has %d attributes, over %d", n, model.MaxAttributes)
	}
	for k, v := range m.Attributes {
		if len(k) > model.MaxAttributeKeyBytes || !utf8.ValidString(k) || strings.HasPrefix(k, model.ReservedAttributePrefix) {
			t.Errorf("envelope attribute key %q (%d bytes) is not one Pub/Sub accepts", text.Truncate(k, 40), len(k))
		}
		if len(v) > model.MaxAttributeValueBytes || !utf8.ValidString(v) {
			t.Errorf("envelope attribute %q has a %d-byte value (valid UTF-8 %v)", text.Truncate(k, 40), len(v), utf8.ValidString(v))
		}
	}
	if size, limit := model.SerializedSize(m), model.MaxMessageSize(dlqTopic); size > limit {
		t.Errorf("envelope is %d bytes serialized, over the %d a publish can carry", size, limit)
	}
	if m.OrderingKey != "" {
		t.Errorf("envelope has ordering key %q; dead letters are published without one", m.OrderingKey)
	}
}

// decodeOK decodes m, failing the test on an error.
func decodeOK(t *testing.T, m model.Message) FailedMessage {
	t.Helper()
	got, err := Decode(m)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return got
}

// carried is what an envelope carries of f: everything but the routing
// fields Message.Topic and Message.Subscription.
func carried(f FailedMessage) FailedMessage {
	f.Message.Topic = model.Topic{}
	f.Message.Subscription = model.Subscription{}
	return f
}

func TestEnvelopeRoundTrip(t *testing.T) {
	for i, f := range sampleFailures() {
		env := Encode(f, dlqTopic)
		withinLimits(t, env)
		if string(env.Data) != string(f.Message.Data) {
			t.Errorf("case %d: data %q, want the original payload %q", i, env.Data, f.Message.Data)
		}
		if _, ok := env.Attributes[AttrOmitted]; ok {
			t.Errorf("case %d: %s = %q for a message that fits", i, AttrOmitted, env.Attributes[AttrOmitted])
		}
		if got := decodeOK(t, env); !sameFailure(got, carried(f)) {
			t.Errorf("case %d: Decode(Encode(f))\n got %+v\nwant %+v", i, got, carried(f))
		}
	}
}

// The envelope as documented: every attribute named, empty ones left out.
func TestEnvelopeAttributes(t *testing.T) {
	f := sampleFailures()[0]
	got := Encode(f, dlqTopic).Attributes
	want := map[string]string{
		AttrEnvelope:        "1",
		AttrStage:           "decode",
		AttrSubscription:    "projects/pubsubio-test/subscriptions/orders-sub",
		AttrError:           `timestamp attribute "ts": "not a time" is not RFC 3339`,
		AttrTime:            "2026-03-14T15:09:26.535897932Z",
		AttrAttempts:        "3",
		AttrMessageID:       "4711",
		AttrOrderingKey:     "customer-7",
		AttrPublishTime:     "2026-03-14T15:08:26.535897932Z",
		AttrDeliveryAttempt: "3",
		"dlq.attr.type":     "order",
		"dlq.attr.ts":       "not a time",
	}
	if !maps.Equal(got, want) {
		t.Errorf("attributes\n got %v\nwant %v", got, want)
	}
}

// A failed message whose error text is megabytes long is truncated, not
// rejected.
func TestEnvelopeTruncatesAMegabyteError(t *testing.T) {
	f := sampleFailures()[1]
	f.Error = strings.Repeat("quota exceeded; ", 4<<20/16) // 4 MiB, built by hand past New's bound
	env := Encode(f, dlqTopic)
	withinLimits(t, env)
	e := env.Attributes[AttrError]
	if len(e) > MaxErrorBytes || !strings.HasPrefix(e, "quota exceeded; ") || !strings.HasSuffix(e, "...") {
		t.Errorf("error attribute is %d bytes (%q...), want at most %d ending in ...", len(e), text.Truncate(e, 40), MaxErrorBytes)
	}
	got := decodeOK(t, env)
	if got.Error != e || string(got.Message.Data) != "payload" {
		t.Errorf("decoded %+v", got)
	}
	// Invalid UTF-8 in the error is replaced, not a reason to fail.
	f.Error = "bad \xff byte"
	if e := Encode(f, dlqTopic).Attributes[AttrError]; e != "bad \uFFFD byte" {
		t.Errorf("error with an invalid byte became %q", e)
	}
}

// Originals that would break Pub/Sub's limits are left out and listed;
// the rest, the payload and the envelope's own attributes stay.
func TestEnvelopeOverflow(t *testing.T) {
	attrs := map[string]string{}
	for i := range 150 {
		attrs[fmt.Sprintf("k%03d", i)] = "v"
	}
	longKey := strings.Repeat("K", model.MaxAttributeKeyBytes-len(OriginalAttributePrefix)+1)
	attrs[longKey] = "fits, but its key does not once prefixed"
	attrs["big"] = strings.Repeat("v", model.MaxAttributeValueBytes+1)
	attrs["bad\xffkey"] = "x"
	attrs["badvalue"] = "\xfe"
	f := sampleFailures()[2]
	f.Message.Attributes = attrs
	f.Message.OrderingKey = strings.Repeat("o", model.MaxOrderingKeyBytes+1)

	env := Encode(f, dlqTopic)
	withinLimits(t, env)
	if len(env.Attributes) != model.MaxAttributes {
		t.Errorf("%d attributes, want every one of the %d used", len(env.Attributes), model.MaxAttributes)
	}
	omitted := env.Attributes[AttrOmitted]
	for _, want := range []string{AttrOrderingKey + " (1025 bytes)", `attribute "big": value of 1025 bytes`, `attribute "bad\xffkey": key`, `attribute "badvalue"`, `attribute "KKKK`, "over Pub/Sub's 100 attributes"} {
		if !strings.Contains(omitted, want) {
			t.Errorf("%s = %q, want it to mention %q", AttrOmitted, omitted, want)
		}
	}
	got := decodeOK(t, env)
	if string(got.Message.Data) != string(f.Message.Data) || got.Stage != StageValidate || got.Topic != f.Topic || got.Message.OrderingKey != "" {
		t.Errorf("decoded %+v", got)
	}
	// The originals carried are the first in key order, intact.
	n := len(got.Message.Attributes)
	if n == 0 || n >= 150 {
		t.Fatalf("%d original attributes carried", n)
	}
	for i := range n {
		if k := fmt.Sprintf("k%03d", i); got.Message.Attributes[k] != "v" {
			t.Errorf("original %s missing from the %d carried", k, n)
		}
	}
}

// A payload too large to publish inside an envelope (dead-lettered for its
// size) is left out; the dead letter still says what failed and why.
func TestEnvelopeOversizedPayload(t *testing.T) {
	f := sampleFailures()[2]
	limit := model.MaxMessageSize(dlqTopic)
	for _, tc := range []struct {
		size int
		kept bool
	}{{limit - 64<<10, true}, {limit, false}, {limit + 1, false}} {
		f.Message.Data = make([]byte, tc.size)
		env := Encode(f, dlqTopic)
		withinLimits(t, env)
		if kept := len(env.Data) == tc.size; kept != tc.kept {
			t.Errorf("%d-byte payload kept: %v, want %v (%s = %q)", tc.size, kept, tc.kept, AttrOmitted, env.Attributes[AttrOmitted])
		}
		if !tc.kept && !strings.Contains(env.Attributes[AttrOmitted], fmt.Sprintf("data (%d bytes)", tc.size)) {
			t.Errorf("%s = %q, want it to give the payload's size", AttrOmitted, env.Attributes[AttrOmitted])
		}
		if got := decodeOK(t, env); got.Stage != StageValidate || got.Error != f.Error {
			t.Errorf("decoded %+v", got)
		}
	}
	// With every attribute slot taken, leaving the payload out still finds
	// room to say so.
	attrs := map[string]string{}
	for i := range 200 {
		attrs[fmt.Sprintf("k%03d", i)] = "v"
	}
	f.Message.Attributes = attrs
	f.Message.Data = make([]byte, limit)
	env := Encode(f, dlqTopic)
	withinLimits(t, env)
	if o := env.Attributes[AttrOmitted]; !strings.Contains(o, "data (") || !strings.Contains(o, "attributes from") {
		t.Errorf("%s = %q", AttrOmitted, o)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := Encode(sampleFailures()[0], dlqTopic)
	with := func(k, v string) model.Message {
		m := good
		m.Attributes = maps.Clone(good.Attributes)
		if v == "" {
			delete(m.Attributes, k)
		} else {
			m.Attributes[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		m    model.Message
		want []string
	}{
		{"not an envelope", model.Message{Data: []byte("x"), Attributes: map[string]string{"a": "b"}}, []string{"not a dead letter this pubsubio reads", AttrEnvelope}},
		{"other version", with(AttrEnvelope, "2"), []string{AttrEnvelope, `"2"`, `reads "1"`}},
		{"bad time", with(AttrTime, "yesterday"), []string{AttrTime, `"yesterday"`}},
		{"bad attempts", with(AttrAttempts, "three"), []string{AttrAttempts, `"three"`}},
		{"negative attempts", with(AttrAttempts, "-1"), []string{AttrAttempts, `"-1"`, "negative"}},
		{"negative delivery attempt", with(AttrDeliveryAttempt, "-3"), []string{AttrDeliveryAttempt, `"-3"`, "negative"}},
		{"unknown stage", with(AttrStage, "transform"), []string{AttrStage, `"transform"`, "not one of"}},
		{"missing stage", with(AttrStage, ""), []string{AttrStage, "is missing"}},
		{"missing stage, named in passing", func() model.Message {
			m := with(AttrStage, "")
			m.Attributes[AttrOmitted] = "dlq.attr.x (300 bytes): not about dlq.stage"
			return m
		}(), []string{AttrStage, "is missing"}},
		{"bad subscription", with(AttrSubscription, "orders-sub"), []string{AttrSubscription, "projects/PROJECT/subscriptions/ID"}},
		{"bad topic and publish time", with(AttrTopic, "projects/p/subscriptions/s"), []string{AttrTopic, "projects/PROJECT/topics/ID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.m)
			if err == nil {
				t.Fatal("Decode succeeded")
			}
			if !errors.Is(err, ErrNotDeadLetter) {
				t.Errorf("error %q does not wrap ErrNotDeadLetter", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// A FailedMessage built by hand may hold what Decode refuses: Encode lists
// it in dlq.omitted instead of writing it, so the envelope still decodes.
func TestEnvelopeLeavesOutWhatDecodeRefuses(t *testing.T) {
	f := sampleFailures()[0]
	f.Stage, f.Attempts, f.Message.DeliveryAttempt = "transform", -1, -2
	env := Encode(f, dlqTopic)
	for _, want := range []string{`dlq.stage "transform": not one of`, "dlq.attempts -1: negative", "dlq.delivery_attempt -2: negative"} {
		if !strings.Contains(env.Attributes[AttrOmitted], want) {
			t.Errorf("%s = %q, want it to list %q", AttrOmitted, env.Attributes[AttrOmitted], want)
		}
	}
	got, err := Decode(env)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got.Stage != "" || got.Attempts != 0 || got.Message.DeliveryAttempt != 0 {
		t.Errorf("decoded stage %q, attempts %d, delivery attempt %d; want them left out", got.Stage, got.Attempts, got.Message.DeliveryAttempt)
	}
}
