package typed

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/linkedin/goavro/v2"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// avroCodec is model.FormatAvro: github.com/linkedin/goavro/v2 reads and writes
// the payload as its native values (maps for records), and the plan maps
// those to and from the struct t.
type avroCodec struct {
	avro *goavro.Codec
	plan *avroConv
	t    reflect.Type
	// schema is the record, walked before goavro reads a binary payload
	// when scan is set (avroscan.go).
	schema *avroType
	scan   bool
	// record names the schema in errors: its record's full name.
	record string
}

// newAvroCodec returns the codec of schema, a writer's schema, for values
// of t in direction dir (lenient: see avroPlanner).
func newAvroCodec(schema string, t reflect.Type, dir direction, lenient bool) (*avroCodec, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("the element type %v is not a struct, which Format %s maps records to", t, model.FormatAvro)
	}
	c, err := goavro.NewCodec(schema)
	if err != nil {
		return nil, fmt.Errorf("the Avro schema does not parse: %w", err)
	}
	at, err := parseAvroSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("the Avro schema is not supported: %w", err)
	}
	if err := checkItemSizes(at, map[*avroType]bool{}); err != nil {
		return nil, err
	}
	plan, err := planAvro(at, t, dir, lenient)
	if err != nil {
		return nil, err
	}
	return &avroCodec{avro: c, plan: plan, t: t, record: at.name, schema: at, scan: hasBlocks(at, map[*avroType]bool{})}, nil
}

// checkAvroType returns why t cannot be read from or written with schema,
// when schema is known at construction; else only why it is not a struct.
func checkAvroType(t reflect.Type, schema string, dir direction) error {
	if schema == "" {
		if t.Kind() != reflect.Struct {
			return fmt.Errorf("the element type %v is not a struct, which Format %s maps records to", t, model.FormatAvro)
		}
		return nil
	}
	if _, err := newAvroCodec(schema, t, dir, false); err != nil {
		return fmt.Errorf("AvroSchema: %w", err)
	}
	return nil
}

func (c *avroCodec) decode(data []byte, enc Encoding) (any, error) {
	var native any
	var rest []byte
	var err error
	if enc == EncodingJSON {
		native, rest, err = c.avro.NativeFromTextual(data)
		rest = bytes.TrimSpace(rest)
	} else if c.scan {
		if err = scanBlocks(c.schema, data); err == nil {
			native, rest, err = c.avro.NativeFromBinary(data)
		}
	} else {
		native, rest, err = c.avro.NativeFromBinary(data)
	}
	if err != nil {
		return nil, fmt.Errorf("the payload is not a record %s in Avro's %s encoding: %w", c.record, enc, err)
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("the payload holds a record %s in Avro's %s encoding followed by %d more bytes", c.record, enc, len(rest))
	}
	v := reflect.New(c.t).Elem()
	if err := c.plan.fromNative(native, v); err != nil {
		return nil, err
	}
	return v.Interface(), nil
}

func (c *avroCodec) encode(v any, enc Encoding) ([]byte, error) {
	native, err := c.plan.toNative(reflect.ValueOf(v))
	if err != nil {
		return nil, err
	}
	b, err := c.write(native, enc)
	if err != nil {
		return nil, fmt.Errorf("the value does not encode as a record %s in Avro's %s encoding: %w", c.record, enc, err)
	}
	return b, nil
}

// write writes native, goavro's form of a record, in enc.
func (c *avroCodec) write(native any, enc Encoding) ([]byte, error) {
	if enc == EncodingJSON {
		return c.avro.TextualFromNative(nil, native)
	}
	return c.avro.BinaryFromNative(nil, native)
}
