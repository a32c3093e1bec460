package model

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMessageCoderRoundTrip(t *testing.T) {
	for _, m := range []Message{
		{},
		{Data: []byte{}, Attributes: map[string]string{}},
		{
			ID: "1", Data: []byte("payload"), Attributes: map[string]string{"k": "v", "a": ""},
			OrderingKey: "key", PublishTime: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), DeliveryAttempt: 3,
			Subscription: SubscriptionOf("my-project", "sub"), Topic: TopicOf("other-project", "topic"),
		},
	} {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Message
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		// cmp keeps nil apart from empty: the coder must too.
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestMessageCoderRejectsGarbage(t *testing.T) {
	b := encodeMessage(Message{ID: "x", Data: []byte("y")})
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(b, 0)} {
		if _, err := decodeMessage(bad); err == nil {
			t.Errorf("decoding %v: no error", bad)
		}
	}
}
