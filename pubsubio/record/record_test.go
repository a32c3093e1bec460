package record

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var published = time.UnixMilli(1716700000123).Add(456 * time.Microsecond)

func message(data string) model.Message {
	return model.Message{
		ID:           "123456789",
		Data:         []byte(data),
		Attributes:   map[string]string{"type": "order", "a<b": "x&y"},
		OrderingKey:  "order-42",
		PublishTime:  published,
		Subscription: model.SubscriptionOf("pubsubio-test", "orders-sub"),
	}
}

func encoder(t *testing.T, cfg Config) *Encoder {
	t.Helper()
	e, err := NewEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The record shape, exactly, for each format.
func TestEncode(t *testing.T) {
	const rest = `,"__attributes":{"a<b":"x&y","type":"order"},"message_id":"123456789","ordering_key":"order-42","publish_time_millis":1716700000123}`
	for _, tc := range []struct {
		format model.Format
		data   string
		want   string
	}{
		{"", "{\n  \"id\": 1,\n  \"tags\": [\"a\", \"<b>\"]\n}\n", `{"data":{"id":1,"tags":["a","<b>"]}` + rest},
		{model.FormatJSON, ` "just a string" `, `{"data":"just a string"` + rest},
		{model.FormatJSON, `null`, `{"data":null` + rest},
		{model.FormatText, "héllo \"world\"\n<tab>\t", `{"data":"héllo \"world\"\n<tab>\t"` + rest},
		{model.FormatText, "", `{"data":""` + rest},
		{model.FormatBytes, "\x00\xff\xfeabc", `{"data":"AP/+YWJj"` + rest},
		{model.FormatBytes, "", `{"data":""` + rest},
	} {
		got, err := encoder(t, Config{Format: tc.format}).Encode(message(tc.data))
		if err != nil {
			t.Errorf("%s %q: %v", tc.format, tc.data, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s %q:\n got %s\nwant %s", tc.format, tc.data, got, tc.want)
		}
		if !json.Valid(got) || strings.Contains(string(got), "\n") {
			t.Errorf("%s %q: record %q is not one line of JSON", tc.format, tc.data, got)
		}
	}
}

func TestEncodeOptionalFieldsAndAttributesKey(t *testing.T) {
	m := model.Message{Data: []byte(`1`)}
	got, err := encoder(t, Config{AttributesKey: "attrs"}).Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"data":1,"attrs":{},"message_id":""}`; string(got) != want {
		t.Errorf("a message with nothing but data:\n got %s\nwant %s", got, want)
	}
	var rec map[string]any
	got, _ = encoder(t, Config{AttributesKey: "méta \"x\""}).Encode(message(`{}`))
	if err := json.Unmarshal(got, &rec); err != nil || rec[`méta "x"`] == nil {
		t.Errorf("a key needing escapes: %s (%v)", got, err)
	}
}

// A payload that does not hold the format is an error saying so and
// where, never a record; the error does not quote the payload.
func TestEncodeRejects(t *testing.T) {
	for _, tc := range []struct {
		format model.Format
		data   string
		want   []string
	}{
		{model.FormatJSON, `{"id": 1,}`, []string{"not JSON", "format JSON", "at byte 10 of 10"}},
		{model.FormatJSON, `{"id": 1} {"id": 2}`, []string{"not JSON", "after top-level value"}},
		{model.FormatJSON, ``, []string{"empty", "format JSON"}},
		{model.FormatJSON, "\"caf\xe9\"", []string{"not valid UTF-8", "format JSON", "offset 4 of 6"}},
		{model.FormatText, "ok\xffsecret", []string{"not valid UTF-8", "format TEXT", "offset 2 of 9"}},
	} {
		_, err := encoder(t, Config{Format: tc.format}).Encode(message(tc.data))
		if err == nil {
			t.Errorf("%s %q: encoded", tc.format, tc.data)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %q: error %q does not contain %q", tc.format, tc.data, err, w)
			}
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q quotes the payload", err)
		}
	}
}

// A string of the message that is not UTF-8 is an error saying which and
// where, never a record with U+FFFD in its place.
func TestEncodeRejectsStringsNotUTF8(t *testing.T) {
	for _, tc := range []struct {
		change func(*model.Message)
		want   string
	}{
		{func(m *model.Message) { m.Attributes["type"] = "ord\xffer" }, `attribute "type" is not valid UTF-8 (invalid byte at offset 3 of 6)`},
		{func(m *model.Message) { m.Attributes["\xfe"] = "x" }, "an attribute's key is not valid UTF-8"},
		{func(m *model.Message) { m.OrderingKey = "\xc3" }, "the ordering key is not valid UTF-8 (invalid byte at offset 0 of 1)"},
		{func(m *model.Message) { m.ID = "12\x80" }, "the message ID is not valid UTF-8"},
	} {
		m := message(`{"id": 1}`)
		tc.change(&m)
		if _, err := encoder(t, Config{}).Encode(m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Encode = %v, want an error containing %q", err, tc.want)
		}
	}
}

func TestConfigRejects(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{Format: "XML"}, []string{"Format", `"XML" is not a known format`, `"JSON"`}},
		{Config{Format: "json"}, []string{"Format", `"json"`}},
		{Config{AttributesKey: "data"}, []string{"AttributesKey", `"data"`, "own keys"}},
		{Config{AttributesKey: "publish_time_millis"}, []string{"AttributesKey", "publish_time_millis"}},
		{Config{AttributesKey: "Data"}, []string{"AttributesKey", `"Data"`, "case folding"}},
		{Config{AttributesKey: "\xff"}, []string{"AttributesKey", "UTF-8"}},
	} {
		_, err := NewEncoder(tc.cfg)
		if err == nil {
			t.Errorf("%+v accepted", tc.cfg)
			continue
		}
		for _, w := range append(tc.want, "pubsubio.Records: invalid configuration") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not contain %q", tc.cfg, err, w)
			}
		}
	}
}
