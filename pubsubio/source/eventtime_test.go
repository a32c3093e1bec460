package source

import (
	"strings"
	"testing"
	"time"
)

func TestEventTime(t *testing.T) {
	publish := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	const attr = "ts"
	cases := []struct {
		name      string
		attribute string
		attrs     map[string]string
		want      time.Time
	}{
		{"no attribute configured", "", map[string]string{attr: "1700000000000"}, publish},
		{"attribute missing", attr, map[string]string{"other": "x"}, publish},
		{"no attributes at all", attr, nil, publish},
		{"RFC 3339", attr, map[string]string{attr: "2023-11-14T22:13:20Z"}, time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)},
		{"RFC 3339 with offset and fraction", attr, map[string]string{attr: "2023-11-14T23:13:20.123456789+01:00"},
			time.Date(2023, 11, 14, 22, 13, 20, 123456789, time.UTC)},
		{"Unix millis", attr, map[string]string{attr: "1700000000123"}, time.UnixMilli(1700000000123)},
		{"Unix millis zero", attr, map[string]string{attr: "0"}, time.UnixMilli(0)},
		{"Unix millis before the epoch", attr, map[string]string{attr: "-1000"}, time.UnixMilli(-1000)},
	}
	for _, c := range cases {
		got, err := eventTime(c.attribute, c.attrs, publish)
		if err != nil {
			t.Errorf("%s: error %v", c.name, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("%s: eventTime = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEventTimeMalformedNamesAttributeAndValue(t *testing.T) {
	publish := time.Unix(1, 0)
	for _, v := range []string{"yesterday", "", "1.5", "2023-11-14 22:13:20", "1e12", "2023-13-01T00:00:00Z"} {
		_, err := eventTime("event_ts", map[string]string{"event_ts": v}, publish)
		if err == nil {
			t.Errorf("value %q: no error", v)
			continue
		}
		for _, want := range []string{`"event_ts"`, `"` + v + `"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("value %q: error %q does not contain %s", v, err, want)
			}
		}
	}
}

func TestEventTimeMalformedLongValueIsTruncated(t *testing.T) {
	long := strings.Repeat("z", 1000)
	_, err := eventTime("ts", map[string]string{"ts": long}, time.Time{})
	if err == nil {
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), `"ts"`) || !strings.Contains(err.Error(), strings.Repeat("z", 64)) {
		t.Errorf("error %q does not name the attribute and the value's start", err)
	}
	if len(err.Error()) > 400 {
		t.Errorf("error is %d bytes long; a long value should be truncated", len(err.Error()))
	}
}
