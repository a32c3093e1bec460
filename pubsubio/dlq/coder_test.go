package dlq

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestFailedMessageCoder(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	f := New(StagePublish, model.Message{Data: []byte("d"), Topic: model.TopicOf("my-project", "t")}, errors.New("boom"), 2, at)
	f.Topic = model.TopicOf("my-project", "t")
	for _, want := range []FailedMessage{{}, f} {
		got, err := decodeFailed(encodeFailed(want))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}
