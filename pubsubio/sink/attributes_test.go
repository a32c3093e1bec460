package sink

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Write sets the event time in Unix milliseconds and an ID derived from
// the element, on a copy of the element's attributes; an ID the element
// already carries stays, a timestamp it carries is replaced.
func TestStampedSetsTimestampAndID(t *testing.T) {
	cfg := Config{TimestampAttribute: "ts", IDAttribute: "eid"}
	at := time.UnixMilli(1767225600123)
	in := model.Message{Data: []byte("x"), Attributes: map[string]string{"k": "v", "ts": "old"}}
	out := cfg.stamped(in, at)
	want := map[string]string{"k": "v", "ts": "1767225600123", "eid": elementID(in, at)}
	if diff := cmp.Diff(want, out.Attributes); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
	if len(out.Attributes["eid"]) != 32 {
		t.Errorf("ID %q, want 32 hex digits", out.Attributes["eid"])
	}
	if diff := cmp.Diff(map[string]string{"k": "v", "ts": "old"}, in.Attributes); diff != "" {
		t.Errorf("the element's own attributes changed (-want +got):\n%s", diff)
	}
	own := model.Message{Data: []byte("x"), Attributes: map[string]string{"eid": "publisher-7"}}
	if got := cfg.stamped(own, at).Attributes["eid"]; got != "publisher-7" {
		t.Errorf("an element carrying the ID attribute got %q, want its own publisher-7", got)
	}
	if got := (Config{}).stamped(in, at); !cmp.Equal(got, in) {
		t.Errorf("without either attribute the message changed: %+v", got)
	}
	if got := (Config{TimestampAttribute: "ts"}).stamped(model.Message{}, time.UnixMilli(-9223372036854775)).Attributes["ts"]; got != "-9223372036854775" {
		t.Errorf("Beam's minimum timestamp written as %q", got)
	}
}

// The ID is the element's: equal elements at the same event time share it
// (a retried bundle republishes under the same ID), and any difference in
// what the element is gives another.
func TestElementIDIdentifiesTheElement(t *testing.T) {
	at := time.UnixMilli(1767225600000)
	base := model.Message{
		ID: "17", Subscription: model.SubscriptionOf("p", "in"), Data: []byte("data"),
		Attributes: map[string]string{"a": "1", "b": "2"}, OrderingKey: "k",
	}
	id := elementID(base, at)
	same := base
	same.Attributes = map[string]string{"b": "2", "a": "1"}
	same.Topic = model.TopicOf("p", "elsewhere")
	if got := elementID(same, at); got != id {
		t.Errorf("an equal element got %s, want %s", got, id)
	}
	redelivered := base
	redelivered.Attributes = map[string]string{"a": "1", "b": "2",
		"googclient_traceparent": "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01", "googclient_tracestate": "x=1"}
	if got := elementID(redelivered, at); got != id {
		t.Errorf("the element carrying a traced read's context got %s, want %s: each delivery has a receive span of its own", got, id)
	}
	variants := map[string]func(*model.Message, *time.Time){
		"message ID":        func(m *model.Message, _ *time.Time) { m.ID = "18" },
		"subscription":      func(m *model.Message, _ *time.Time) { m.Subscription.ID = "in2" },
		"data":              func(m *model.Message, _ *time.Time) { m.Data = []byte("datb") },
		"attribute value":   func(m *model.Message, _ *time.Time) { m.Attributes = map[string]string{"a": "1", "b": "3"} },
		"attribute moved":   func(m *model.Message, _ *time.Time) { m.Attributes = map[string]string{"a": "12", "b": ""} },
		"ordering key":      func(m *model.Message, _ *time.Time) { m.OrderingKey = "" },
		"event time":        func(_ *model.Message, t *time.Time) { *t = t.Add(time.Millisecond) },
		"data into the key": func(m *model.Message, _ *time.Time) { m.Data, m.OrderingKey = []byte("datak"), "" },
	}
	for name, edit := range variants {
		m, when := base, at
		m.Attributes = map[string]string{"a": "1", "b": "2"}
		edit(&m, &when)
		if got := elementID(m, when); got == id {
			t.Errorf("%s differs but the ID is the same, %s", name, got)
		}
	}
}

// An attribute Pub/Sub would refuse, or one name for both, is refused at
// construction.
func TestWriteAttributesRejected(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{IDAttribute: "goog-id"}, `IDAttribute "goog-id" starts with "goog"`},
		{Config{TimestampAttribute: "\t"}, `TimestampAttribute "\t" is blank`},
		{Config{TimestampAttribute: strings.Repeat("t", 300)}, "over Pub/Sub's 256"},
		{Config{IDAttribute: "meta", TimestampAttribute: "meta"}, `IDAttribute and TimestampAttribute are both "meta"`},
	}
	for _, c := range cases {
		c.cfg.Topic = validTopic
		if _, err := c.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error containing %q", c.cfg, err, c.want)
		}
	}
}
