package source

import (
	"fmt"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/wire"
)

// Split (an element) and Restriction (the read's restriction) cross
// runners as opaque bytes: a Java runner re-encodes a Go schema row with a
// nil AckIDs slice wrongly (see package wire).
func init() {
	wire.RegisterCoder(encodeSplit, decodeSplit)
	wire.RegisterCoder(encodeRestriction, decodeRestriction)
}

// Leading version bytes.
const (
	splitVersion       = 1
	restrictionVersion = 1
)

func encodeSplit(s Split) []byte {
	w := wire.NewWriter(16 + len(s.Subscription.Project) + len(s.Subscription.ID))
	w.Byte(splitVersion)
	w.Varint(int64(s.Index))
	w.String(s.Subscription.Project)
	w.String(s.Subscription.ID)
	return w.Bytes()
}

func decodeSplit(b []byte) (Split, error) {
	r := wire.NewReader(b)
	r.Version("Split", splitVersion)
	var s Split
	s.Index = int(r.Varint())
	s.Subscription.Project = r.String()
	s.Subscription.ID = r.String()
	if err := r.Done(); err != nil {
		return Split{}, fmt.Errorf("pubsubio: decoding a Split: %w", err)
	}
	return s, nil
}

func encodeRestriction(rest Restriction) []byte {
	size := 32 + len(rest.Owner)
	for _, id := range rest.AckIDs {
		size += 2 + len(id)
	}
	w := wire.NewWriter(size)
	w.Byte(restrictionVersion)
	w.Varint(rest.Seq)
	w.String(rest.Owner)
	w.Strings(rest.AckIDs)
	w.Varint(rest.Emitted)
	w.Bool(rest.Final)
	return w.Bytes()
}

func decodeRestriction(b []byte) (Restriction, error) {
	r := wire.NewReader(b)
	r.Version("Restriction", restrictionVersion)
	var rest Restriction
	rest.Seq = r.Varint()
	rest.Owner = r.String()
	rest.AckIDs = r.Strings()
	rest.Emitted = r.Varint()
	rest.Final = r.Bool()
	if err := r.Done(); err != nil {
		return Restriction{}, fmt.Errorf("pubsubio: decoding a Restriction: %w", err)
	}
	return rest, nil
}
