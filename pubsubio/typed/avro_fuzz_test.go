package typed

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Any payload either decodes into an order that encodes and decodes back
// to itself, or fails to decode: it never panics, and decoding it
// allocates at most decodeAllocBound of its size, measured on every
// input.
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
	// The fields before tags, then a block claiming 2^20 tags: 16 MB from
	// goavro without the walk.
	f.Add(append(make([]byte, 17), 0x80, 0x80, 0x80, 0x01), false)
	dec, err := newAvroCodec(orderSchema, orderType, decoding, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, json bool) {
		e := EncodingBinary
		if json {
			e = EncodingJSON
		}
		if n := decodeAllocated(func() { _, _ = dec.decode(data, e) }); n > decodeAllocBound(len(data)) {
			t.Fatalf("decoding %d bytes in %s allocated %d bytes, over %d", len(data), e, n, decodeAllocBound(len(data)))
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

// decodeAllocBound is the most a payload of n bytes may take to decode:
// what a record of many small items takes per byte (goavro's maps and
// slices, then the struct's), with room to spare, and a constant for the
// record itself and the allocator's granularity. Without the walk before
// goavro (avroscan.go), five bytes would ask for 32 GiB.
func decodeAllocBound(n int) uint64 { return 64<<10 + 256*uint64(n) }

// decodeAllocated is what decode allocates on the heap, averaged over
// four calls.
func decodeAllocated(decode func()) uint64 {
	const calls = 4
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		decode()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / calls
}
