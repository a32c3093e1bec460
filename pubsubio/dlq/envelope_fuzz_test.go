package dlq

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// fuzzAttributes reads "key=value" lines as attributes, so that one fuzzed
// string can stand for any attribute map.
func fuzzAttributes(lines string) map[string]string {
	if lines == "" {
		return nil
	}
	attrs := map[string]string{}
	for _, line := range strings.Split(lines, "\n") {
		k, v, _ := strings.Cut(line, "=")
		attrs[k] = v
	}
	return attrs
}

// FuzzDecode: Decode never panics on any message; it either returns a
// FailedMessage or an error; a message without the envelope marker is
// never taken for a dead letter; and what it decodes, encoded again,
// decodes to the same FailedMessage whenever the envelope carries it whole
// (nothing in AttrOmitted, the error text within MaxErrorBytes of UTF-8).
func FuzzDecode(f *testing.F) {
	for _, fm := range sampleFailures() {
		env := Encode(fm, dlqTopic)
		var lines []string
		for k, v := range env.Attributes {
			lines = append(lines, k+"="+v)
		}
		f.Add(env.Data, strings.Join(lines, "\n"))
	}
	for _, attrs := range []string{
		"",
		"dlq.envelope=2",
		"dlq.envelope=1",
		"dlq.envelope=1\ndlq.time=not a time\ndlq.attempts=x\ndlq.subscription=orders",
		"dlq.envelope=1\ndlq.topic=projects//topics/\ndlq.delivery_attempt=+3",
		"dlq.envelope=1\ndlq.publish_time=0000-01-01T00:00:00+01:00",
		"dlq.envelope=1\ndlq.time=9999-12-31T23:59:59-01:00",
		"dlq.envelope=1\ndlq.attr.=empty key\ndlq.attr.dlq.stage=nested",
		"dlq.envelope=1\ndlq.error=\xff\xfe",
		"dlq.envelope=1\ndlq.attempts=99999999999999999999",
	} {
		f.Add([]byte("payload"), attrs)
	}
	f.Fuzz(func(t *testing.T, data []byte, attrLines string) {
		m := model.Message{Data: data, Attributes: fuzzAttributes(attrLines)}
		got, err := Decode(m)
		if _, marked := m.Attributes[AttrEnvelope]; !marked && err == nil {
			t.Fatalf("Decode took a message without %s for a dead letter: %+v", AttrEnvelope, got)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "dlq.Decode: ") {
				t.Fatalf("Decode error does not say who failed: %v", err)
			}
			return
		}
		env := Encode(got, dlqTopic)
		again, err := Decode(env)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(m))) failed: %v\nenvelope attributes: %q", err, env.Attributes)
		}
		if _, omitted := env.Attributes[AttrOmitted]; omitted || len(got.Error) > MaxErrorBytes || !utf8.ValidString(got.Error) {
			return
		}
		if !sameFailure(again, got) {
			t.Fatalf("decoded, encoded and decoded again:\n got %+v\nwant %+v", again, got)
		}
	})
}

// FuzzEncodeDecode: for any FailedMessage, Encode never panics, its
// envelope is a message Pub/Sub accepts (withinLimits), Decode reads it
// back, and everything the envelope did not list as omitted round-trips.
func FuzzEncodeDecode(f *testing.F) {
	for _, fm := range sampleFailures() {
		var lines []string
		for k, v := range fm.Message.Attributes {
			lines = append(lines, k+"="+v)
		}
		f.Add(string(fm.Stage), fm.Code, fm.Error, fm.Message.ID, fm.Message.OrderingKey, fm.Message.Data, strings.Join(lines, "\n"),
			fm.Attempts, fm.Message.DeliveryAttempt, fm.Time.Unix(), int64(fm.Time.Nanosecond()), fm.Subscription.Project, fm.Topic.ID)
	}
	f.Add("publish", "INVALID_ARGUMENT", strings.Repeat("é", MaxErrorBytes), "", strings.Repeat("o", 2000), []byte{}, "goog=x\n\xff=1\nk=\xff",
		-1, 0, int64(-62167219200), int64(0), "", "")
	f.Add("decode", "", "", "1", "", []byte("x"), strings.Repeat("k=v\n", 3), 0, 5, int64(253402300800), int64(1), "p/x", "t")
	f.Fuzz(func(t *testing.T, stage, code, errText, id, orderingKey string, data []byte, attrLines string,
		attempts, deliveryAttempt int, sec, nsec int64, project, topicID string) {
		fm := FailedMessage{
			Message: model.Message{
				ID: id, Data: data, Attributes: fuzzAttributes(attrLines), OrderingKey: orderingKey,
				DeliveryAttempt: deliveryAttempt, PublishTime: time.Unix(sec, nsec),
			},
			Stage: FailureStage(stage), Code: code, Error: errText, Attempts: attempts,
			Time: time.Unix(nsec, sec),
		}
		if project != "" {
			fm.Subscription = model.SubscriptionOf(project, topicID)
			fm.Topic = model.TopicOf(project, topicID)
		}
		env := Encode(fm, dlqTopic)
		withinLimits(t, env)
		got, err := Decode(env)
		if err != nil {
			t.Fatalf("Decode(Encode(f)) failed: %v\nenvelope attributes: %q", err, env.Attributes)
		}
		omitted, any := env.Attributes[AttrOmitted]
		if !any && string(got.Message.Data) != string(data) {
			t.Fatalf("payload %q came back as %q", data, got.Message.Data)
		}
		if any || len(errText) > MaxErrorBytes || !utf8.ValidString(errText) {
			if len(got.Error) > MaxErrorBytes || !utf8.ValidString(got.Error) {
				t.Fatalf("error text came back as %d bytes, valid UTF-8 %v (omitted: %s)", len(got.Error), utf8.ValidString(got.Error), omitted)
			}
			return
		}
		if !sameFailure(got, carried(fm)) {
			t.Fatalf("Decode(Encode(f))\n got %+v\nwant %+v", got, carried(fm))
		}
	})
}
