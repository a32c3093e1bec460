package typed

import (
	"reflect"
	"testing"
)

// A few bytes claiming two billion items are a decode failure, never an
// allocation that ends the process; so is a count that overflows when
// negated.
func TestAvroHugeBlockClaims(t *testing.T) {
	type tags struct {
		Tags []string `avro:"tags"`
	}
	for _, schema := range []string{
		`{"type":"record","name":"R","fields":[{"name":"tags","type":{"type":"array","items":"string"}}]}`,
		`{"type":"record","name":"R","fields":[{"name":"labels","type":{"type":"map","values":"string"}},{"name":"x","type":"int","default":0}]}`,
	} {
		c, err := newAvroCodec(schema, reflect.TypeOf(tags{}), decoding, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, data := range [][]byte{
			{0xfe, 0xff, 0xff, 0xff, 0x0f},                                           // 2^31-1 items
			{0xfd, 0xff, 0xff, 0xff, 0x0f, 0x02},                                     // -(2^31-1) items, then a size
			{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00},       // the most negative long
			{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // longer than a long
		} {
			_, err := c.decode(data, EncodingBinary)
			wantError(t, "a huge block", err, "not a record R")
		}
	}
	c, err := newAvroCodec(`{"type":"record","name":"R","fields":[{"name":"tags","type":{"type":"array","items":"string"}}]}`, reflect.TypeOf(tags{}), decoding, true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.decode([]byte{0xfe, 0xff, 0xff, 0xff, 0x0f}, EncodingBinary)
	wantError(t, "2^31-1 items", err, "claims 2147483647 items with 0 bytes left")
}

// Items that take no bytes have no count a payload bounds: refused.
func TestAvroZeroSizeItemsRefused(t *testing.T) {
	type nothing struct{}
	type holder struct {
		Xs []nothing `avro:"xs"`
	}
	_, err := newAvroCodec(`{"type":"record","name":"R","fields":[{"name":"xs","type":{"type":"array","items":{"type":"record","name":"E","fields":[]}}}]}`,
		reflect.TypeOf(holder{}), decoding, false)
	wantError(t, "an array of empty records", err, `field "xs" of record R`, "array of record E", "no bytes")
	_, err = newAvroCodec(`{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"xs","type":{"type":"array","items":"null"}}]}`,
		reflect.TypeOf(struct {
			N int32 `avro:"n"`
		}{}), decoding, true)
	wantError(t, "an array of nulls, even unmapped", err, "array of null")
	_, err = newAvroCodec(`{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"xs","type":{"type":"array","items":{
	  "type":"record","name":"P","fields":[{"name":"a","type":{"type":"record","name":"E","fields":[]}},{"name":"b","type":"E"}]}}}]}`,
		reflect.TypeOf(struct {
			N int32 `avro:"n"`
		}{}), decoding, true)
	wantError(t, "an array of records holding one empty record twice", err, "array of record P")
}
