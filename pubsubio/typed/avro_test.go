package typed

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/linkedin/goavro/v2"
)

var orderType = reflect.TypeOf(order{})

func orderCodec(t *testing.T, dir direction) *avroCodec {
	t.Helper()
	c, err := newAvroCodec(orderSchema, orderType, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Every documented mapping survives a round trip, in both encodings; the
// field order lacks is written with its default, and a decoded []byte
// does not point into the payload.
func TestAvroRoundTrip(t *testing.T) {
	enc, dec := orderCodec(t, encoding), orderCodec(t, decoding)
	want := sampleOrder()
	want.Local = "not mapped"
	for _, e := range []Encoding{EncodingBinary, EncodingJSON} {
		data, err := enc.encode(want, e)
		if err != nil {
			t.Fatalf("%s: encode: %v", e, err)
		}
		got, err := dec.decode(data, e)
		if err != nil {
			t.Fatalf("%s: decode: %v", e, err)
		}
		w := want
		w.Local = "" // avro:"-"
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", e, diff)
		}
		native, _, err := enc.avro.NativeFromBinary(mustBinary(t, enc.avro, data, e))
		if err != nil || native.(map[string]any)["extra"] != "x" {
			t.Errorf("%s: the field order lacks was written as %v (%v), want its default", e, native.(map[string]any)["extra"], err)
		}
		for i := range data {
			data[i] = 0
		}
		if got.(order).Blob[1] != 0xff {
			t.Errorf("%s: the decoded bytes change with the payload", e)
		}
	}
}

// mustBinary returns data in the binary encoding.
func mustBinary(t *testing.T, c *goavro.Codec, data []byte, e Encoding) []byte {
	t.Helper()
	if e == EncodingBinary {
		return bytes.Clone(data)
	}
	native, _, err := c.NativeFromTextual(data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.BinaryFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A payload written by another Avro writer (goavro with native maps, as
// any producer would) decodes, nulls included; the JSON encoding is
// Avro's, with unions as {"type": value}.
func TestAvroDecodesForeignPayloads(t *testing.T) {
	c := orderCodec(t, decoding)
	o := sampleOrder()
	o.Note, o.Previous, o.Customer.Since = nil, nil, nil
	native := map[string]any{
		"id": o.ID, "quantity": o.Quantity, "total": o.Total, "paid": o.Paid, "weight": o.Weight, "big": o.Big,
		"note": nil, "tags": []any{"a", "b"}, "prices": map[string]any{"x": int64(1), "y": int64(-2)},
		"status": "PAID", "hash": []byte{1, 2, 3, 4}, "blob": o.Blob, "at": o.At, "day": o.Day, "elapsed": o.Elapsed,
		"customer": map[string]any{"name": "Ada", "since": nil}, "previous": nil,
		"lines": []any{map[string]any{"sku": "s1", "hash": []byte{9, 9, 9, 9}}}, "extra": "from the writer",
	}
	bin, err := c.avro.BinaryFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.decode(bin, EncodingBinary)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	txt, err := c.avro.TextualFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.decode(append(txt, " \n"...), EncodingJSON); err != nil || !cmp.Equal(o, got) {
		t.Errorf("Avro JSON %s: %v, %v", txt, got, err)
	}
	withUnion := bytes.Replace(txt, []byte(`"note":null`), []byte(`"note":{"string":"hi"}`), 1)
	if got, err := c.decode(withUnion, EncodingJSON); err != nil || got.(order).Note == nil || *got.(order).Note != "hi" {
		t.Errorf("a union branch in Avro JSON: %v, %v", got, err)
	}
}

// A payload that is not the record fails to decode, saying why, without
// quoting it.
func TestAvroMalformed(t *testing.T) {
	c := orderCodec(t, decoding)
	good, err := orderCodec(t, encoding).encode(sampleOrder(), EncodingBinary)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		enc  Encoding
		want []string
	}{
		{"empty", nil, EncodingBinary, []string{"not a record com.example.Order", "BINARY"}},
		{"truncated", good[:len(good)/2], EncodingBinary, []string{"not a record com.example.Order"}},
		{"trailing bytes", append(bytes.Clone(good), 7, 7), EncodingBinary, []string{"followed by 2 more bytes"}},
		{"garbage after a field", []byte{2, 's', 0x7f}, EncodingBinary, []string{"not a record"}},
		{"JSON for binary", []byte(`{"id":"secret"}`), EncodingBinary, []string{"not a record"}},
		{"binary for JSON", good, EncodingJSON, []string{"not a record com.example.Order", "JSON"}},
		{"JSON missing fields", []byte(`{"id":"secret"}`), EncodingJSON, []string{"not a record"}},
		{"two records", []byte(`{"id":"a"} {"id":"b"}`), EncodingJSON, []string{"not a record"}},
	} {
		_, err := c.decode(tc.data, tc.enc)
		wantError(t, tc.name, err, tc.want...)
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q quotes the payload", tc.name, err)
		}
	}
}

// A value the schema cannot hold fails to encode, naming the field.
func TestAvroEncodeRejects(t *testing.T) {
	c := orderCodec(t, encoding)
	for _, tc := range []struct {
		name   string
		change func(*order)
		want   []string
	}{
		{"unknown enum symbol", func(o *order) { o.Status = "LOST" }, []string{"LOST"}},
		{"fixed of the wrong size", func(o *order) { o.Lines[0].Hash = []byte{1} }, []string{"size"}},
	} {
		o := sampleOrder()
		tc.change(&o)
		_, err := c.encode(o, EncodingBinary)
		wantError(t, tc.name, err, tc.want...)
	}
	type wide struct {
		N int64 `avro:"n"`
	}
	w, err := newAvroCodec(`{"type":"record","name":"W","fields":[{"name":"n","type":"int"}]}`, reflect.TypeOf(wide{}), encoding, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.encode(wide{N: 1 << 31}, EncodingBinary)
	wantError(t, "int out of range", err, "typed.wide.N", "2147483648", "Avro int")
}

// Types and schemas that do not map are refused when the plan is built,
// naming the field and what it would need.
func TestAvroPlanRejects(t *testing.T) {
	type (
		badInt struct {
			N int16 `avro:"n"`
		}
		badUnion struct {
			N string `avro:"n"`
		}
		noField struct {
			N int32 `avro:"n"`
			M string
		}
		tagged struct {
			N int32 `avro:"number"`
		}
		embedded struct {
			customer
			N int32 `avro:"n"`
		}
		twice struct {
			N  int32 `avro:"n"`
			N2 int32 `avro:"n"`
		}
		wide struct {
			N int64 `avro:"n"`
		}
		self struct {
			N    int32 `avro:"n"`
			Next *self `avro:"next"`
		}
		stamp struct {
			N int64 `avro:"n"`
		}
	)
	intRecord := `{"type":"record","name":"R","fields":[{"name":"n","type":"int"}]}`
	for _, tc := range []struct {
		name   string
		schema string
		t      reflect.Type
		dir    direction
		want   []string
	}{
		{"int16 for int", intRecord, reflect.TypeOf(badInt{}), decoding, []string{"typed.badInt.N is a int16", "Avro int maps to int, int32 or int64"}},
		{"union of two", `{"type":"record","name":"R","fields":[{"name":"n","type":["null","string","long"]}]}`, reflect.TypeOf(badUnion{}), decoding, []string{"union of several types"}},
		{"nullable into a value", `{"type":"record","name":"R","fields":[{"name":"n","type":["null","string"]}]}`, reflect.TypeOf(badUnion{}), decoding, []string{"maps to a pointer"}},
		{"struct field the record lacks", intRecord, reflect.TypeOf(noField{}), decoding, []string{"noField.M", "record R has no field of that name"}},
		{"tag naming nothing", intRecord, reflect.TypeOf(tagged{}), encoding, []string{`its tag names field "number"`}},
		{"embedded", intRecord, reflect.TypeOf(embedded{}), decoding, []string{"embedded"}},
		{"two fields, one record field", intRecord, reflect.TypeOf(twice{}), decoding, []string{"both map to field \"n\""}},
		{"record field without default, no struct field", `{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"m","type":"int"}]}`, reflect.TypeOf(badInt{}), encoding, []string{`field "m" of record R has no default`}},
		{"long into int64 is fine, int64 into int is checked at run time", intRecord, reflect.TypeOf(wide{}), encoding, nil},
		{"recursive, the field mapped", `{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"next","type":["null","R"]}]}`, reflect.TypeOf(self{}), decoding, []string{"record R, which contains it"}},
		{"timestamp into int64", `{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"long","logicalType":"timestamp-millis"}}]}`, reflect.TypeOf(stamp{}), decoding, []string{"maps to time.Time"}},
		{"decimal", `{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}}]}`, reflect.TypeOf(stamp{}), decoding, []string{"decimal is not supported"}},
		{"not a record", `"string"`, reflect.TypeOf(stamp{}), decoding, []string{"top level is string"}},
		{"not a struct", intRecord, reflect.TypeOf(""), decoding, []string{"not a struct"}},
		{"not a schema", `{"type":"record"`, reflect.TypeOf(stamp{}), decoding, []string{"does not parse"}},
		{"unknown type", `{"type":"record","name":"R","fields":[{"name":"n","type":"Nope"}]}`, reflect.TypeOf(stamp{}), decoding, []string{"does not parse"}},
	} {
		_, err := newAvroCodec(tc.schema, tc.t, tc.dir, false)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		wantError(t, tc.name, err, tc.want...)
	}
}

// Decoding with a revision leaves a field the revision lacks at zero;
// with the configured schema the same type is refused.
func TestAvroLenientForRevisions(t *testing.T) {
	if _, err := newAvroCodec(readingSchema, readingType, decoding, false); err == nil {
		t.Error("reading.Unit is not in revision 1, and a strict plan accepted it")
	}
	c, err := newAvroCodec(readingSchema, readingType, decoding, true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.avro.BinaryFromNative(nil, map[string]any{"sensor": "s", "value": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.decode(data, EncodingBinary); err != nil || !cmp.Equal(got, reading{Sensor: "s", Value: 1.5}) {
		t.Errorf("decoded %+v, %v", got, err)
	}
}

func TestAvroNamesAndUnionKeys(t *testing.T) {
	at, err := parseAvroSchema(orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, f := range at.fields {
		keys[f.name] = f.typ.unionKey()
		if f.typ.kind == "union" {
			keys[f.name] = f.typ.branches[1].unionKey()
		}
	}
	lines := at.fields[len(at.fields)-2].typ.items
	want := map[string]string{"status": "com.example.Status", "previous": "com.example.Customer", "at": "long.timestamp-millis", "day": "int.date", "note": "string"}
	for k, w := range want {
		if keys[k] != w {
			t.Errorf("%s: union key %q, want %q", k, keys[k], w)
		}
	}
	if lines.name != "com.example.lines.Line" || lines.fields[1].typ.name != "com.example.Hash" {
		t.Errorf("namespaces: %q with a field of %q", lines.name, lines.fields[1].typ.name)
	}
}

// Strings in slices and maps convert whole when the Go type allows it
// (named containers included), item by item otherwise.
func TestAvroStringContainers(t *testing.T) {
	type (
		names  []string
		label  string
		labels map[string]label
		holder struct {
			A names             `avro:"a"`
			B labels            `avro:"b"`
			C map[string]string `avro:"c"`
			D []label           `avro:"d"`
		}
	)
	schema := `{"type":"record","name":"H","fields":[
	  {"name":"a","type":{"type":"array","items":"string"}},
	  {"name":"b","type":{"type":"map","values":"string"}},
	  {"name":"c","type":{"type":"map","values":{"type":"enum","name":"E","symbols":["X","Y"]}}},
	  {"name":"d","type":{"type":"array","items":"string"}}]}`
	want := holder{A: names{"x", "y"}, B: labels{"k": "v"}, C: map[string]string{"k": "Y"}, D: []label{"p"}}
	enc, err := newAvroCodec(schema, reflect.TypeOf(holder{}), encoding, false)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := newAvroCodec(schema, reflect.TypeOf(holder{}), decoding, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Encoding{EncodingBinary, EncodingJSON} {
		data, err := enc.encode(want, e)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		got, err := dec.decode(data, e)
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("%s: %+v, %v", e, got, err)
		}
	}
	_, err = enc.encode(holder{C: map[string]string{"k": "Z"}}, EncodingBinary)
	wantError(t, "an enum symbol in a map", err, "Z")
}
