package model

import (
	"fmt"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/wire"
)

// Message crosses runners as opaque bytes (see package wire for why a
// schema row does not survive a Java runner).
func init() { wire.RegisterCoder(encodeMessage, decodeMessage) }

// messageVersion is the first byte of an encoded Message.
const messageVersion = 1

func encodeMessage(m Message) []byte {
	w := wire.NewWriter(32 + len(m.ID) + len(m.Data) + len(m.OrderingKey))
	appendMessage(w, m)
	return w.Bytes()
}

func decodeMessage(b []byte) (Message, error) {
	r := wire.NewReader(b)
	m := readMessage(r)
	if err := r.Done(); err != nil {
		return Message{}, fmt.Errorf("pubsubio: decoding a Message: %w", err)
	}
	return m, nil
}

// MarshalBinary encodes m the way pubsubio's Beam coder does: every field,
// attributes in key order, so equal messages give equal bytes. PublishTime
// keeps its instant, not its location.
func (m Message) MarshalBinary() ([]byte, error) { return encodeMessage(m), nil }

// UnmarshalBinary decodes what MarshalBinary encoded.
func (m *Message) UnmarshalBinary(b []byte) error {
	got, err := decodeMessage(b)
	if err != nil {
		return err
	}
	*m = got
	return nil
}

func appendMessage(w *wire.Writer, m Message) {
	w.Byte(messageVersion)
	w.String(m.ID)
	w.Blob(m.Data)
	w.StringMap(m.Attributes)
	w.String(m.OrderingKey)
	w.Time(m.PublishTime)
	w.Varint(int64(m.DeliveryAttempt))
	w.String(m.Subscription.Project)
	w.String(m.Subscription.ID)
	w.String(m.Topic.Project)
	w.String(m.Topic.ID)
}

func readMessage(r *wire.Reader) Message {
	r.Version("Message", messageVersion)
	var m Message
	m.ID = r.String()
	m.Data = r.Blob()
	m.Attributes = r.StringMap()
	m.OrderingKey = r.String()
	m.PublishTime = r.Time()
	m.DeliveryAttempt = int(r.Varint())
	m.Subscription.Project = r.String()
	m.Subscription.ID = r.String()
	m.Topic.Project = r.String()
	m.Topic.ID = r.String()
	if r.Err() != nil {
		return Message{}
	}
	return m
}
