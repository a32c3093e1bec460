package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	w := NewWriter(0)
	w.Byte(7)
	w.Uvarint(300)
	w.Varint(-5)
	w.Bool(true)
	w.String("héllo")
	w.Blob(nil)
	w.Blob([]byte{})
	w.Blob([]byte("ab"))
	w.Strings(nil)
	w.Strings([]string{})
	w.Strings([]string{"x", ""})
	w.StringMap(nil)
	w.StringMap(map[string]string{})
	w.StringMap(map[string]string{"b": "2", "a": "1"})
	w.Time(time.Time{})
	w.Time(at)
	w.Time(time.Unix(-3, 5))

	r := NewReader(w.Bytes())
	got := []any{r.Byte(), r.Uvarint(), r.Varint(), r.Bool(), r.String(),
		r.Blob(), r.Blob(), r.Blob(), r.Strings(), r.Strings(), r.Strings(),
		r.StringMap(), r.StringMap(), r.StringMap(), r.Time(), r.Time(), r.Time()}
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
	want := []any{byte(7), uint64(300), int64(-5), true, "héllo",
		[]byte(nil), []byte{}, []byte("ab"), []string(nil), []string{}, []string{"x", ""},
		map[string]string(nil), map[string]string{}, map[string]string{"a": "1", "b": "2"},
		time.Time{}, at.UTC(), time.Unix(-3, 5).UTC()}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("value %d: got %#v, want %#v", i, got[i], want[i])
		}
	}
}

// TestMapOrder: the same map encodes to the same bytes however it was
// built, so values holding maps can be GroupByKey keys.
func TestMapOrder(t *testing.T) {
	var first []byte
	for i := range 20 {
		m := map[string]string{}
		for j := range 30 {
			k := string(rune('a' + (j*7+i)%30))
			m[k] = k
		}
		w := NewWriter(0)
		w.StringMap(m)
		if i == 0 {
			first = w.Bytes()
		} else if !bytes.Equal(first, w.Bytes()) {
			t.Fatalf("encoding %d differs from the first", i)
		}
	}
}

func TestErrors(t *testing.T) {
	w := NewWriter(0)
	w.String("abcdef")
	full := w.Bytes()
	for n := range len(full) {
		r := NewReader(full[:n])
		_ = r.String()
		if !errors.Is(r.Done(), ErrTruncated) {
			t.Errorf("%d of %d bytes: err %v, want ErrTruncated", n, len(full), r.Done())
		}
	}
	r := NewReader(append(bytes.Clone(full), 0))
	_ = r.String()
	if r.Done() == nil {
		t.Error("a trailing byte went unnoticed")
	}
	r = NewReader([]byte{2})
	r.Version("Thing", 1)
	if r.Err() == nil {
		t.Error("a wrong version went unnoticed")
	}
	// A huge length must fail, not allocate.
	w = NewWriter(0)
	w.Uvarint(1 << 40)
	r = NewReader(w.Bytes())
	if r.Strings() != nil || !errors.Is(r.Err(), ErrTruncated) {
		t.Errorf("huge count: err %v", r.Err())
	}
}
