package typed

import (
	"bytes"
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

// eventSchema is the record scripts/bench carries in its typed case: what
// a Pub/Sub message holds.
const eventSchema = `{"type": "record", "name": "Event", "fields": [
  {"name": "message_id", "type": "string"}, {"name": "data", "type": "bytes"},
  {"name": "attributes", "type": {"type": "map", "values": "string"}},
  {"name": "ordering_key", "type": "string"}, {"name": "publish_time", "type": "long"}]}`

// event is eventSchema's record as a Go struct.
type event struct {
	MessageID   string            `avro:"message_id"`
	Data        []byte            `avro:"data"`
	Attributes  map[string]string `avro:"attributes"`
	OrderingKey string            `avro:"ordering_key"`
	PublishTime int64             `avro:"publish_time"`
}

// BenchmarkAvroDecode is what decoding the bench's record (a 16-character
// ID, 192 bytes of data, three attributes, an ordering key, a time) costs
// in its parts: the walk before goavro reads a binary payload (scan),
// goavro's read alone (goavro), and the typed codec's whole decoding,
// walk, read and plan (typed); scripts/bench compares the last with a
// hand-written decoder on Beam:
//
//	go test -run '^$' -bench AvroDecode -benchtime 20000x -count 3 ./pubsubio/typed/
func BenchmarkAvroDecode(b *testing.B) {
	c, err := newAvroCodec(eventSchema, reflect.TypeOf(event{}), decoding, false)
	if err != nil {
		b.Fatal(err)
	}
	data, err := c.write(map[string]any{
		"message_id": "1000000000000042", "data": bytes.Repeat([]byte("payload-042 "), 16),
		"attributes":   map[string]any{"source": "bench", "kind": "order", "shard": "0"},
		"ordering_key": "key-2", "publish_time": int64(1716700000042),
	}, EncodingBinary)
	if err != nil {
		b.Fatal(err)
	}
	if !c.scan {
		b.Fatal("the record has a map, but the codec does not walk it")
	}
	run := func(name string, decode func() error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := decode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("scan", func() error { return scanBlocks(c.schema, data) })
	run("goavro", func() error {
		_, _, err := c.avro.NativeFromBinary(data)
		return err
	})
	run("typed", func() error {
		v, err := c.decode(data, EncodingBinary)
		decoded = v
		return err
	})
}

// decoded keeps what a benchmark decodes alive.
var decoded any
