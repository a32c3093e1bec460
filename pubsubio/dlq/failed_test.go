package dlq

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/exec"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestNewBoundsTheError(t *testing.T) {
	long := strings.Repeat("é", 2*MaxErrorBytes)
	at := time.Unix(1700000000, 0)
	f := New(StagePublish, model.Message{Data: []byte("x")}, status.Error(codes.InvalidArgument, long), 1, at)
	if len(f.Error) > MaxErrorBytes || !utf8.ValidString(f.Error) || !strings.HasSuffix(f.Error, "...") {
		t.Errorf("Error is %d bytes (valid UTF-8 %v), want at most %d ending in ...", len(f.Error), utf8.ValidString(f.Error), MaxErrorBytes)
	}
	if f.Code != "INVALID_ARGUMENT" || f.Stage != StagePublish || f.Attempts != 1 || !f.Time.Equal(at) {
		t.Errorf("New = %+v", f)
	}
}

// sample returns FailedMessages as the sink and the source build them.
func sampleFailures() []FailedMessage {
	at := time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)
	sub := model.SubscriptionOf("pubsubio-test", "orders-sub")
	topic := model.TopicOf("pubsubio-test", "orders")
	decode := New(StageDecode, model.Message{
		ID:              "4711",
		Data:            []byte(`{"order": 1`),
		Attributes:      map[string]string{"type": "order", "ts": "not a time"},
		OrderingKey:     "customer-7",
		PublishTime:     at.Add(-time.Minute),
		DeliveryAttempt: 3,
		Subscription:    sub,
	}, errors.New(`timestamp attribute "ts": "not a time" is not RFC 3339`), 3, at)
	decode.Subscription = sub
	publish := New(StagePublish, model.Message{Data: []byte("payload"), Attributes: map[string]string{"a": "b"}},
		status.Error(codes.InvalidArgument, "Invalid attribute"), 2, at)
	publish.Topic = topic
	validate := New(StageValidate, model.Message{Data: []byte{0xff, 0x00, 0xfe}, Topic: topic},
		status.Error(codes.InvalidArgument, "the message breaks Pub/Sub's limits"), 0, at)
	validate.Topic = topic
	return []FailedMessage{decode, publish, validate}
}

// sameFailure compares two FailedMessages as values: times by instant
// (a coder keeps the instant, not the location or the monotonic reading),
// nil and empty alike for Data and Attributes.
func sameFailure(a, b FailedMessage) bool {
	norm := func(f FailedMessage) FailedMessage {
		f.Time = f.Time.UTC().Round(0)
		f.Message.PublishTime = f.Message.PublishTime.UTC().Round(0)
		if len(f.Message.Data) == 0 {
			f.Message.Data = nil
		}
		if len(f.Message.Attributes) == 0 {
			f.Message.Attributes = nil
		}
		return f
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// FailedMessage travels between DoFns in Beam's encoding: the custom coder
// registered in coder.go (never a schema row, which a Java runner mangles),
// written into the pipeline proto and rebuilt from it on the worker. What
// the inferred coder encodes, the worker's coder decodes to an equal value.
func TestBeamCoderRoundTrip(t *testing.T) {
	ft := typex.New(reflect.TypeOf(FailedMessage{}))
	if got := beam.NewCoder(ft).String(); strings.HasPrefix(got, "R[") {
		t.Fatalf("Beam infers coder %s for FailedMessage, want the custom coder", got)
	}
	custom := coder.LookupCustomCoder(ft.Type())
	if custom == nil {
		t.Fatal("no custom coder is registered for FailedMessage")
	}
	inferred := coder.CoderFrom(custom)
	ids, protos, err := graphx.MarshalCoders([]*coder.Coder{inferred})
	if err != nil {
		t.Fatal(err)
	}
	onWorker, err := graphx.UnmarshalCoders(ids, protos)
	if err != nil {
		t.Fatal(err)
	}
	dec := exec.MakeElementDecoder(onWorker[0])
	enc := beam.NewElementEncoder(ft.Type())
	cases := append(sampleFailures(), FailedMessage{}, FailedMessage{Error: strings.Repeat("x", MaxErrorBytes)})
	for i, f := range cases {
		var buf bytes.Buffer
		if err := enc.Encode(f, &buf); err != nil {
			t.Fatalf("case %d: encoding: %v", i, err)
		}
		got, err := dec.Decode(&buf)
		if err != nil {
			t.Fatalf("case %d: decoding: %v", i, err)
		}
		if !sameFailure(got.Elm.(FailedMessage), f) {
			t.Errorf("case %d: round trip through Beam's coder\n got %+v\nwant %+v", i, got.Elm, f)
		}
		if buf.Len() != 0 {
			t.Errorf("case %d: %d bytes left after decoding", i, buf.Len())
		}
	}
}

func TestOriginal(t *testing.T) {
	fs := sampleFailures()
	src, sink := fs[0], fs[1]

	got := src.Original()
	if got.Subscription != src.Subscription || !got.Topic.IsZero() || got.ID != "4711" || got.OrderingKey != "customer-7" || got.DeliveryAttempt != 3 {
		t.Errorf("a source failure's original: %+v", got)
	}
	got.Data[0] = 'X'
	got.Attributes["type"] = "changed"
	if src.Message.Data[0] != '{' || src.Message.Attributes["type"] != "order" {
		t.Errorf("changing the original changed the dead letter: %+v", src.Message)
	}

	// A sink failure on the default topic: Message.Topic was unset, the
	// original goes back where it was going.
	if !sink.Message.Topic.IsZero() {
		t.Fatal("setup: the sample sink failure names its own topic")
	}
	if got := sink.Original(); got.Topic != sink.Topic || string(got.Data) != "payload" || got.Attributes["a"] != "b" {
		t.Errorf("a sink failure's original: %+v, want Topic %v", got, sink.Topic)
	}
}
