package typed

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJSONRoundTrip(t *testing.T) {
	unit := "°C"
	c := jsonCodec{readingType}
	for _, want := range []reading{{Sensor: "s<1>", Value: 21.5, Unit: &unit}, {}} {
		data, err := c.encode(want, EncodingJSON)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.decode(data, EncodingJSON)
		if err != nil {
			t.Fatalf("decoding %s: %v", data, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", data, diff)
		}
	}
	// encoding/json's own leniency: unknown fields are ignored, and the
	// encoding a message names does not matter.
	got, err := c.decode([]byte(` {"sensor":"a","other":[1,2]} `), EncodingBinary)
	if err != nil || got != (reading{Sensor: "a"}) {
		t.Errorf("unknown field: %+v, %v", got, err)
	}
}

// A payload that is not JSON, or not of the type, fails to decode, saying
// where, without quoting the payload.
func TestJSONMalformed(t *testing.T) {
	c := jsonCodec{readingType}
	for _, tc := range []struct {
		data string
		want []string
	}{
		{``, []string{"not JSON", "unexpected end"}},
		{`{"sensor": "secret",}`, []string{"not JSON", "at byte 21 of 21"}},
		{`{"sensor": "a"} {"sensor": "b"}`, []string{"not JSON", "after top-level value"}},
		{`{"sensor": 7}`, []string{"does not decode into typed.reading", "sensor"}},
		{`[1]`, []string{"does not decode into typed.reading"}},
	} {
		_, err := c.decode([]byte(tc.data), EncodingJSON)
		wantError(t, tc.data, err, tc.want...)
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q quotes the payload", err)
		}
	}
}

func TestJSONTypeChecks(t *testing.T) {
	type withChan struct {
		C chan int
	}
	wantError(t, "a channel field", checkJSONType(reflect.TypeOf(withChan{})), "encoding/json", "chan int", "`json:\"-\"`")
	if err := checkJSONType(reflect.TypeOf(map[string][]float64{})); err != nil {
		t.Errorf("a map of slices: %v", err)
	}
	type nan struct{ F float64 }
	_, err := jsonCodec{reflect.TypeOf(nan{})}.encode(nan{F: nanValue()}, EncodingJSON)
	wantError(t, "NaN", err, "does not encode as JSON", "NaN")
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}
