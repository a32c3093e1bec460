package sink

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestCheckLimits(t *testing.T) {
	attrs := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[strings.Repeat("k", 1)+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "v"
		}
		return m
	}
	limit := maxMessageSize(validTopic)
	// A message of exactly the limit: its data field is what remains after
	// the tag and the length varint.
	exact := model.Message{Data: make([]byte, limit-1-4)}
	if got := messageSize(exact); got != limit {
		t.Fatalf("test setup: size %d, want %d", got, limit)
	}
	for _, tc := range []struct {
		name string
		m    model.Message
		want string // empty: accepted
	}{
		{"data only", model.Message{Data: []byte("x")}, ""},
		{"attributes only", model.Message{Attributes: map[string]string{"a": "b"}}, ""},
		{"empty", model.Message{}, "neither data nor attributes"},
		{"exactly the size limit", exact, ""},
		{"one byte over", model.Message{Data: make([]byte, limit-1-4+1)}, fmt.Sprintf("over the %d a publish request", limit)},
		{"10 MB of data", model.Message{Data: make([]byte, 10<<20)}, "bytes serialized"},
		{"100 attributes", model.Message{Attributes: attrs(100)}, ""},
		{"101 attributes", model.Message{Attributes: attrs(101)}, "101 attributes, over Pub/Sub's 100"},
		{"256-byte key", model.Message{Attributes: map[string]string{strings.Repeat("k", 256): "v"}}, ""},
		{"257-byte key", model.Message{Attributes: map[string]string{strings.Repeat("k", 257): "v"}}, "is 257 bytes, over Pub/Sub's 256"},
		{"1024-byte value", model.Message{Attributes: map[string]string{"k": strings.Repeat("v", 1024)}}, ""},
		{"1025-byte value", model.Message{Attributes: map[string]string{"k": strings.Repeat("v", 1025)}}, `the value of attribute "k" is 1025 bytes`},
		{"reserved prefix", model.Message{Data: []byte("x"), Attributes: map[string]string{"googclient_x": "1"}}, `"googclient_x" starts with "goog"`},
		{"invalid UTF-8 key", model.Message{Data: []byte("x"), Attributes: map[string]string{"\xff": "1"}}, "not valid UTF-8"},
		{"invalid UTF-8 value", model.Message{Data: []byte("x"), Attributes: map[string]string{"k": "\xff"}}, `the value of attribute "k" is not valid UTF-8`},
		{"1024-byte ordering key", model.Message{Data: []byte("x"), OrderingKey: strings.Repeat("o", 1024)}, ""},
		{"1025-byte ordering key", model.Message{Data: []byte("x"), OrderingKey: strings.Repeat("o", 1025)}, "ordering key is 1025 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLimits(validTopic, tc.m, messageSize(tc.m))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("code %v, want INVALID_ARGUMENT", status.Code(err))
			}
		})
	}
}
