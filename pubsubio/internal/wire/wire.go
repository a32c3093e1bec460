// Package wire is the byte encoding of the values pubsubio hands a runner:
// messages, dead letters, splits and restrictions. Beam Go would encode
// those structs as schema rows, and a Java runner (Flink) re-encodes a Go
// row wrongly when a nil slice or map sits in a field the schema calls
// non-nullable; registered with beam.RegisterCoder, this encoding reaches
// the runner as opaque length-prefixed bytes instead.
//
// The encoding is deterministic (map keys are written sorted), so equal
// values give equal bytes and may serve as GroupByKey keys; it keeps nil
// apart from empty for slices and maps; and every top-level value starts
// with a version byte, so that a later release can still read state a
// runner checkpointed with this one.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Writer appends encoded values to a byte slice.
type Writer struct {
	buf []byte
}

// NewWriter returns a Writer whose buffer starts with room for size bytes.
func NewWriter(size int) *Writer { return &Writer{buf: make([]byte, 0, size)} }

// Bytes returns what was written.
func (w *Writer) Bytes() []byte { return w.buf }

// Byte writes one raw byte (a version or a flag).
func (w *Writer) Byte(b byte) { w.buf = append(w.buf, b) }

// Uvarint writes v as an unsigned varint.
func (w *Writer) Uvarint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }

// Varint writes v as a zigzag varint.
func (w *Writer) Varint(v int64) { w.buf = binary.AppendVarint(w.buf, v) }

// Bool writes b as one byte.
func (w *Writer) Bool(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// String writes s with its length.
func (w *Writer) String(s string) {
	w.Uvarint(uint64(len(s)))
	w.buf = append(w.buf, s...)
}

// Blob writes b with its length plus one; 0 stands for nil, so nil and
// empty stay apart.
func (w *Writer) Blob(b []byte) {
	if w.present(b == nil, len(b)) {
		w.buf = append(w.buf, b...)
	}
}

// Strings writes a string slice, nil kept apart from empty.
func (w *Writer) Strings(ss []string) {
	if !w.present(ss == nil, len(ss)) {
		return
	}
	for _, s := range ss {
		w.String(s)
	}
}

// StringMap writes m's entries in key order, nil kept apart from empty.
func (w *Writer) StringMap(m map[string]string) {
	if !w.present(m == nil, len(m)) {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.String(k)
		w.String(m[k])
	}
}

// present writes the prefix of a value that keeps nil apart from empty: 0
// for nil, else its length n plus 1. It reports whether the value follows.
func (w *Writer) present(isNil bool, n int) bool {
	if isNil {
		w.Uvarint(0)
		return false
	}
	w.Uvarint(uint64(n) + 1)
	return true
}

// Time writes t as Unix seconds and nanoseconds. The location and the
// monotonic reading are not kept; Read returns the instant in UTC, and
// the zero Time as the zero Time.
func (w *Writer) Time(t time.Time) {
	if t.IsZero() {
		w.Byte(0)
		return
	}
	w.Byte(1)
	w.Varint(t.Unix())
	w.Uvarint(uint64(t.Nanosecond()))
}

// ErrTruncated is wrapped by a Reader's error when the input ends inside a
// value.
var ErrTruncated = errors.New("wire: input ends inside a value")

// Reader decodes what a Writer wrote. The first error sticks: later reads
// return zero values, and Err reports it.
type Reader struct {
	buf []byte
	off int
	err error
}

// NewReader returns a Reader over b.
func NewReader(b []byte) *Reader { return &Reader{buf: b} }

// Err returns the first error met, if any.
func (r *Reader) Err() error { return r.err }

// Done returns the first error met, or an error when bytes remain unread.
func (r *Reader) Done() error {
	if r.err == nil && r.off != len(r.buf) {
		r.err = fmt.Errorf("wire: %d unread bytes after the value", len(r.buf)-r.off)
	}
	return r.err
}

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Byte reads one raw byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.buf) {
		r.fail(ErrTruncated)
		return 0
	}
	b := r.buf[r.off]
	r.off++
	return b
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf[r.off:])
	if !r.advanceVarint(n) {
		return 0
	}
	return v
}

// advanceVarint moves past a varint of n bytes, as encoding/binary
// reports n, or records why there is none.
func (r *Reader) advanceVarint(n int) bool {
	switch {
	case n == 0:
		r.fail(ErrTruncated)
	case n < 0:
		r.fail(errors.New("wire: varint overflows 64 bits"))
	default:
		r.off += n
		return true
	}
	return false
}

// Varint reads a zigzag varint.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.buf[r.off:])
	if !r.advanceVarint(n) {
		return 0
	}
	return v
}

// Bool reads a byte written by Writer.Bool.
func (r *Reader) Bool() bool {
	switch b := r.Byte(); b {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail(fmt.Errorf("wire: bool byte %d", b))
		return false
	}
}

// length reads a length and checks that that many bytes (at least one
// each) can follow.
func (r *Reader) length(v uint64) int {
	if r.err != nil {
		return 0
	}
	if v > uint64(len(r.buf)-r.off) {
		r.fail(fmt.Errorf("%w: a length of %d with %d bytes left", ErrTruncated, v, len(r.buf)-r.off))
		return 0
	}
	return int(v)
}

// present reads the prefix Writer.present wrote: the value's length, and
// whether it is there (false for nil, or once reading failed).
func (r *Reader) present() (int, bool) {
	v := r.Uvarint()
	if r.err != nil || v == 0 {
		return 0, false
	}
	n := r.length(v - 1)
	return n, r.err == nil
}

// String reads a string.
func (r *Reader) String() string {
	n := r.length(r.Uvarint())
	if r.err != nil {
		return ""
	}
	s := string(r.buf[r.off : r.off+n])
	r.off += n
	return s
}

// Blob reads a byte slice written by Writer.Blob (a copy: the result does
// not alias the input).
func (r *Reader) Blob() []byte {
	n, ok := r.present()
	if !ok {
		return nil
	}
	b := make([]byte, n)
	copy(b, r.buf[r.off:r.off+n])
	r.off += n
	return b
}

// Strings reads a string slice.
func (r *Reader) Strings() []string {
	n, ok := r.present()
	if !ok {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.String()
	}
	if r.err != nil {
		return nil
	}
	return ss
}

// StringMap reads a map written by Writer.StringMap.
func (r *Reader) StringMap() map[string]string {
	n, ok := r.present()
	if !ok {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.String()
		m[k] = r.String()
	}
	if r.err != nil {
		return nil
	}
	return m
}

// Time reads a time written by Writer.Time.
func (r *Reader) Time() time.Time {
	switch flag := r.Byte(); flag {
	case 0:
		return time.Time{}
	case 1:
		sec := r.Varint()
		nsec := r.Uvarint()
		if r.err != nil {
			return time.Time{}
		}
		if nsec >= uint64(time.Second) {
			r.fail(fmt.Errorf("wire: %d nanoseconds in a time", nsec))
			return time.Time{}
		}
		return time.Unix(sec, int64(nsec)).UTC()
	default:
		r.fail(fmt.Errorf("wire: time flag byte %d", flag))
		return time.Time{}
	}
}

// Version reads a value's leading version byte and fails unless it is
// want; what names the value in the error.
func (r *Reader) Version(what string, want byte) {
	if v := r.Byte(); r.err == nil && v != want {
		r.fail(fmt.Errorf("wire: %s encoded with version %d, this build reads version %d", what, v, want))
	}
}
