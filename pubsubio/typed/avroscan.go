package typed

import (
	"errors"
	"fmt"
)

// Why a binary payload is walked before goavro reads it: goavro makes room
// for an array or map block's items as soon as it reads the block's count,
// before reading the items, and accepts counts up to 2^31-1. A payload of
// five bytes claiming two billion items makes it ask for tens of gigabytes,
// which ends the process; a poison message would take the worker down
// instead of becoming a dead letter. Every item takes at least one byte
// (checkItemSizes refuses schemas where it would not), so scanBlocks
// refuses a block that claims more items than there are bytes left, which
// bounds what goavro allocates by the payload's size. It runs only for
// schemas that have arrays or maps.

// mapKey is the type of a map's keys.
var mapKey = &avroType{kind: "string"}

// errTruncated is a payload that ends inside a value.
var errTruncated = errors.New("the payload ends inside a value")

// hasBlocks reports whether values of t can hold an array or a map; seen
// holds the named types already walked, since one may be referred to more
// than once.
func hasBlocks(t *avroType, seen map[*avroType]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.kind {
	case "array", "map":
		return true
	case "record":
		for _, f := range t.fields {
			if hasBlocks(f.typ, seen) {
				return true
			}
		}
	case "union":
		for _, b := range t.branches {
			if hasBlocks(b, seen) {
				return true
			}
		}
	}
	return false
}

// checkItemSizes returns why an array or map of t holds items that can
// take no bytes at all (null, an empty record, a fixed of size 0), whose
// count no payload size bounds; seen is as for hasBlocks.
func checkItemSizes(t *avroType, seen map[*avroType]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	switch t.kind {
	case "array", "map":
		if t.kind == "array" && minSize(t.items, map[*avroType]int{}) == 0 {
			return fmt.Errorf("an array of %s, whose items can take no bytes, is not supported", t.items.describe())
		}
		return checkItemSizes(t.items, seen)
	case "record":
		for _, f := range t.fields {
			if err := checkItemSizes(f.typ, seen); err != nil {
				return fmt.Errorf("field %q of record %s: %w", f.name, t.name, err)
			}
		}
	case "union":
		for _, b := range t.branches {
			if err := checkItemSizes(b, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// minSize is the fewest bytes a value of t takes in the binary encoding.
// known holds the records already sized: a record may be referred to more
// than once, and never contains itself (parseAvroSchema refuses that).
func minSize(t *avroType, known map[*avroType]int) int {
	switch t.kind {
	case "null":
		return 0
	case "float":
		return 4
	case "double":
		return 8
	case "fixed":
		return t.size
	case "record":
		if n, ok := known[t]; ok {
			return n
		}
		n := 0
		for _, f := range t.fields {
			n += minSize(f.typ, known)
		}
		known[t] = n
		return n
	}
	return 1 // a varint, a length, a union's index, a block count
}

// scanner walks a binary payload by its schema.
type scanner struct{ buf []byte }

// scanBlocks returns why data, a binary value of t, has a block claiming
// more items than the bytes left could hold, or ends inside a value.
func scanBlocks(t *avroType, data []byte) error {
	s := scanner{data}
	return s.skip(t)
}

func (s *scanner) take(n int64) error {
	if n < 0 || n > int64(len(s.buf)) {
		return errTruncated
	}
	s.buf = s.buf[n:]
	return nil
}

// varint reads a zig-zag encoded long.
func (s *scanner) varint() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if len(s.buf) == 0 {
			return 0, errTruncated
		}
		b := s.buf[0]
		s.buf = s.buf[1:]
		u |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("a number in the payload is longer than a long")
}

func (s *scanner) skip(t *avroType) error {
	switch t.kind {
	case "null":
		return nil
	case "boolean":
		return s.take(1)
	case "int", "long", "enum":
		_, err := s.varint()
		return err
	case "float":
		return s.take(4)
	case "double":
		return s.take(8)
	case "bytes", "string":
		n, err := s.varint()
		if err != nil {
			return err
		}
		return s.take(n)
	case "fixed":
		return s.take(int64(t.size))
	case "record":
		for _, f := range t.fields {
			if err := s.skip(f.typ); err != nil {
				return err
			}
		}
		return nil
	case "union":
		i, err := s.varint()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(t.branches)) {
			return fmt.Errorf("a union's branch index %d is out of range", i)
		}
		return s.skip(t.branches[i])
	case "array", "map":
		return s.blocks(t)
	}
	return fmt.Errorf("no binary layout for Avro %s", t.describe())
}

// blocks skips an array's or a map's blocks: each a count (negative when
// the block's size in bytes follows), the items, and a zero count last.
func (s *scanner) blocks(t *avroType) error {
	for {
		n, err := s.varint()
		if err != nil || n == 0 {
			return err
		}
		if n < 0 {
			n = -n
			if _, err := s.varint(); err != nil {
				return err
			}
		}
		if n < 0 || n > int64(len(s.buf)) {
			return fmt.Errorf("a block of the %s claims %d items with %d bytes left", t.kind, n, len(s.buf))
		}
		for range n {
			if t.kind == "map" {
				if err := s.skip(mapKey); err != nil {
					return err
				}
			}
			if err := s.skip(t.items); err != nil {
				return err
			}
		}
	}
}
