package dlq

import (
	"fmt"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/wire"
)

// FailedMessage crosses runners as opaque bytes, like model.Message (see
// package wire for why).
func init() { wire.RegisterCoder(encodeFailed, decodeFailed) }

// failedVersion is the first byte of an encoded FailedMessage.
const failedVersion = 1

func encodeFailed(f FailedMessage) []byte {
	msg, _ := f.Message.MarshalBinary() // never fails
	w := wire.NewWriter(64 + len(msg) + len(f.Error))
	w.Byte(failedVersion)
	w.Blob(msg)
	w.String(f.Subscription.Project)
	w.String(f.Subscription.ID)
	w.String(f.Topic.Project)
	w.String(f.Topic.ID)
	w.String(string(f.Stage))
	w.String(f.Code)
	w.String(f.Error)
	w.Time(f.Time)
	w.Varint(int64(f.Attempts))
	return w.Bytes()
}

func decodeFailed(b []byte) (FailedMessage, error) {
	r := wire.NewReader(b)
	r.Version("FailedMessage", failedVersion)
	msg := r.Blob()
	var f FailedMessage
	f.Subscription.Project = r.String()
	f.Subscription.ID = r.String()
	f.Topic.Project = r.String()
	f.Topic.ID = r.String()
	f.Stage = FailureStage(r.String())
	f.Code = r.String()
	f.Error = r.String()
	f.Time = r.Time()
	f.Attempts = int(r.Varint())
	if err := r.Done(); err != nil {
		return FailedMessage{}, fmt.Errorf("pubsubio: decoding a FailedMessage: %w", err)
	}
	if err := f.Message.UnmarshalBinary(msg); err != nil {
		return FailedMessage{}, fmt.Errorf("pubsubio: decoding a FailedMessage: %w", err)
	}
	return f, nil
}
