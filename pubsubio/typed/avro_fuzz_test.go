package typed

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Any payload either decodes into an order that encodes and decodes back
// to itself, or fails to decode: it never panics and never allocates
// beyond its size.
func FuzzAvroDecode(f *testing.F) {
	enc, err := newAvroCodec(orderSchema, orderType, encoding, false)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range []Encoding{EncodingBinary, EncodingJSON} {
		data, err := enc.encode(sampleOrder(), e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, e == EncodingJSON)
	}
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0x0f}, false)
	dec, err := newAvroCodec(orderSchema, orderType, decoding, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, json bool) {
		e := EncodingBinary
		if json {
			e = EncodingJSON
		}
		v, err := dec.decode(data, e)
		if err != nil {
			return
		}
		again, err := enc.encode(v, EncodingBinary)
		if err != nil {
			return // e.g. an enum symbol or a time goavro reads but will not write
		}
		back, err := dec.decode(again, EncodingBinary)
		if err != nil {
			t.Fatalf("%v decoded from %q, encoded to %q, does not decode: %v", v, data, again, err)
		}
		if diff := cmp.Diff(v, back); diff != "" {
			t.Fatalf("decoded from %q, a round trip changes it (-first +second):\n%s", data, diff)
		}
	})
}
