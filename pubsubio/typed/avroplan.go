package typed

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"time"
)

// avroConv converts between goavro's native values of one Avro type and
// Go values of one type: the plan for a field, built once per schema and
// element type, so that a message only runs it.
type avroConv struct {
	// fromNative sets v, which is settable, from n.
	fromNative func(n any, v reflect.Value) error
	// toNative returns v as goavro takes it.
	toNative func(v reflect.Value) (any, error)
}

// avroPlanner builds the plan of an element type for a schema.
type avroPlanner struct {
	dir direction
	// lenient leaves a struct field the record lacks at its zero value
	// instead of refusing the type: for decoding with a revision the
	// messages name, which may be older than the type.
	lenient bool
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	durationType = reflect.TypeOf(time.Duration(0))
)

// planAvro returns the plan mapping the record at, the schema's top
// level, to the struct t.
func planAvro(at *avroType, t reflect.Type, dir direction, lenient bool) (*avroConv, error) {
	if at.kind != "record" {
		return nil, fmt.Errorf("the Avro schema's top level is %s; it must be a record, which maps to the element type %v", at.describe(), t)
	}
	pl := &avroPlanner{dir: dir, lenient: lenient}
	return pl.conv(at, t, t.String())
}

// conv returns the plan for Avro type at and Go type gt, or why they do
// not map; path names the Go field ("Order.Items[].Price").
func (pl *avroPlanner) conv(at *avroType, gt reflect.Type, path string) (*avroConv, error) {
	mismatch := func(want string) error {
		return fmt.Errorf("%s is a %v, but Avro %s maps to %s", path, gt, at.describe(), want)
	}
	kind := gt.Kind()
	switch at.logical {
	case "timestamp-millis", "timestamp-micros", "date":
		if gt != timeType {
			return nil, mismatch("time.Time")
		}
		return &avroConv{fromNative: setNative[time.Time], toNative: getNative[time.Time]}, nil
	case "time-millis", "time-micros":
		if gt != durationType {
			return nil, mismatch("time.Duration")
		}
		return &avroConv{fromNative: setNative[time.Duration], toNative: getNative[time.Duration]}, nil
	case "decimal":
		return nil, fmt.Errorf("%s: Avro decimal is not supported; declare the field as bytes or fixed and decode it yourself", path)
	}
	switch at.kind {
	case "boolean":
		if kind != reflect.Bool {
			return nil, mismatch("bool")
		}
		return &avroConv{
			fromNative: func(n any, v reflect.Value) error { return setAs(n, v, v.SetBool) },
			toNative:   func(v reflect.Value) (any, error) { return v.Bool(), nil },
		}, nil
	case "int":
		if kind != reflect.Int && kind != reflect.Int32 && kind != reflect.Int64 {
			return nil, mismatch("int, int32 or int64")
		}
		return &avroConv{
			fromNative: func(n any, v reflect.Value) error {
				return setAs(n, v, func(x int32) { v.SetInt(int64(x)) })
			},
			toNative: func(v reflect.Value) (any, error) {
				x := v.Int()
				if x < math.MinInt32 || x > math.MaxInt32 {
					return nil, fmt.Errorf("%s is %d, out of the range of Avro int (32 bits)", path, x)
				}
				return int32(x), nil
			},
		}, nil
	case "long":
		if kind != reflect.Int && kind != reflect.Int64 {
			return nil, mismatch("int or int64")
		}
		return &avroConv{
			fromNative: func(n any, v reflect.Value) error { return setAs(n, v, v.SetInt) },
			toNative:   func(v reflect.Value) (any, error) { return v.Int(), nil },
		}, nil
	case "float":
		if kind != reflect.Float32 && kind != reflect.Float64 {
			return nil, mismatch("float32 or float64")
		}
		return &avroConv{
			fromNative: func(n any, v reflect.Value) error {
				return setAs(n, v, func(x float32) { v.SetFloat(float64(x)) })
			},
			toNative: func(v reflect.Value) (any, error) { return float32(v.Float()), nil },
		}, nil
	case "double":
		if kind != reflect.Float64 {
			return nil, mismatch("float64")
		}
		return &avroConv{
			fromNative: func(n any, v reflect.Value) error { return setAs(n, v, v.SetFloat) },
			toNative:   func(v reflect.Value) (any, error) { return v.Float(), nil },
		}, nil
	case "string", "enum":
		if kind != reflect.String {
			return nil, mismatch("string")
		}
		return &avroConv{
			fromNative: func(n any, v reflect.Value) error { return setAs(n, v, v.SetString) },
			toNative:   func(v reflect.Value) (any, error) { return v.String(), nil },
		}, nil
	case "bytes", "fixed":
		return pl.bytes(at, gt, path, mismatch)
	case "array":
		if kind != reflect.Slice {
			return nil, mismatch("a slice")
		}
		return pl.array(at, gt, path)
	case "map":
		if kind != reflect.Map || gt.Key().Kind() != reflect.String {
			return nil, mismatch("a map with string keys")
		}
		return pl.mapOf(at, gt, path)
	case "record":
		if kind != reflect.Struct {
			return nil, mismatch("a struct")
		}
		return pl.record(at, gt, path)
	case "union":
		return pl.union(at, gt, path)
	}
	return nil, fmt.Errorf("%s: Avro %s has no Go counterpart here", path, at.describe())
}

// bytes maps bytes to []byte, and fixed to []byte or [size]byte. A decoded
// []byte is copied: goavro's points into the payload. An empty one is nil,
// whatever the encoding: goavro gives nil from JSON and an empty slice from
// binary, and a round trip through the other encoding would change it.
func (pl *avroPlanner) bytes(at *avroType, gt reflect.Type, path string, mismatch func(string) error) (*avroConv, error) {
	isBytes := func(t reflect.Type) bool { return t.Elem().Kind() == reflect.Uint8 }
	switch {
	case gt.Kind() == reflect.Slice && isBytes(gt):
		return &avroConv{
			fromNative: func(n any, v reflect.Value) error {
				return setAs(n, v, func(b []byte) {
					if len(b) == 0 {
						b = nil
					}
					v.SetBytes(bytes.Clone(b))
				})
			},
			toNative: func(v reflect.Value) (any, error) { return v.Bytes(), nil },
		}, nil
	case at.kind == "fixed" && gt.Kind() == reflect.Array && isBytes(gt) && gt.Len() == at.size:
		return &avroConv{
			fromNative: func(n any, v reflect.Value) error {
				return setAs(n, v, func(b []byte) { reflect.Copy(v, reflect.ValueOf(b)) })
			},
			toNative: func(v reflect.Value) (any, error) {
				b := make([]byte, v.Len())
				reflect.Copy(reflect.ValueOf(b), v)
				return b, nil
			},
		}, nil
	case at.kind == "fixed":
		return nil, mismatch(fmt.Sprintf("[]byte or [%d]byte", at.size))
	}
	return nil, mismatch("[]byte")
}

// setAs sets v from n, which goavro gives as a T.
func setAs[T any](n any, v reflect.Value, set func(T)) error {
	x, ok := n.(T)
	if !ok {
		return nativeMismatch(n, v)
	}
	set(x)
	return nil
}

func setNative[T any](n any, v reflect.Value) error {
	return setAs(n, v, func(x T) { v.Set(reflect.ValueOf(x)) })
}

func getNative[T any](v reflect.Value) (any, error) { return v.Interface().(T), nil }

// nativeMismatch is a value goavro gave in a form the plan did not expect,
// which the plan's checks should rule out.
func nativeMismatch(n any, v reflect.Value) error {
	return fmt.Errorf("goavro gave a %T where the plan expected a value for a %v", n, v.Type())
}
