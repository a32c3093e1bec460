package model

import (
	"strings"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	for _, name := range []string{
		"projects/my-project/subscriptions/orders",
		"projects/example.com:legacy-proj/subscriptions/a.b~c+d%e_f-g",
	} {
		s, err := ParseSubscription(name)
		if err != nil {
			t.Fatalf("ParseSubscription(%q): %v", name, err)
		}
		if s.String() != name {
			t.Errorf("ParseSubscription(%q).String() = %q", name, s)
		}
	}
	topic, err := ParseTopic("projects/my-project/topics/events")
	if err != nil || topic != TopicOf("my-project", "events") {
		t.Errorf("ParseTopic = %v, %v", topic, err)
	}
}

// Every malformed name is rejected with an error that quotes the bad part.
func TestMalformedNamesAreRejectedNamingTheValue(t *testing.T) {
	for _, tc := range []struct{ name, quoted string }{
		{"orders", "orders"},
		{"projects/my-project/topics/orders", "projects/my-project/topics/orders"},
		{"projects/my-project/subscriptions/", `""`},
		{"projects/My-Project/subscriptions/orders", "My-Project"},
		{"projects/p/subscriptions/orders", `"p"`},
		{"projects/my-project/subscriptions/1orders", "1orders"},
		{"projects/my-project/subscriptions/goog-orders", "goog-orders"},
		{"projects/my-project/subscriptions/ab", `"ab"`},
		{"projects/my-project/subscriptions/has space", "has space"},
		{"projects/my-project/subscriptions/" + strings.Repeat("a", 256), strings.Repeat("a", 256)},
	} {
		_, err := ParseSubscription(tc.name)
		if err == nil {
			t.Errorf("ParseSubscription(%q) accepted a malformed name", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.quoted) {
			t.Errorf("ParseSubscription(%q) error does not name %q: %v", tc.name, tc.quoted, err)
		}
	}
	if err := TopicOf("my-project", "goog").Validate(); err == nil {
		t.Error(`topic ID "goog" accepted; Pub/Sub reserves the prefix`)
	}
	if !(Topic{}).IsZero() || TopicOf("my-project", "t1x").IsZero() {
		t.Error("IsZero is wrong")
	}
}
