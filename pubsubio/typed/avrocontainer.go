package typed

import (
	"fmt"
	"reflect"
)

// Arrays, maps and unions: the Avro types that hold others.

var (
	stringSliceType = reflect.TypeOf([]string(nil))
	stringMapType   = reflect.TypeOf(map[string]string(nil))
)

// stringItems reports whether at holds strings (or enum symbols) that gt,
// a slice or map, holds as strings, so that a whole array or map converts
// to or from fast, the type every such slice or map converts to: the
// commonest containers, converted without reflection per item.
func stringItems(at *avroType, gt, fast reflect.Type) bool {
	return (at.items.kind == "string" || at.items.kind == "enum") && at.items.logical == "" && gt.ConvertibleTo(fast)
}

// wholeStrings converts a whole array or map of strings between goavro's
// form and gt, through fast ([]string or map[string]string), which gt
// converts to: from returns fast's value of goavro's, ok false when it is
// not one; to returns goavro's of fast's.
func wholeStrings(gt, fast reflect.Type, from func(n any) (any, bool), to func(x any) any) *avroConv {
	return &avroConv{
		fromNative: func(n any, v reflect.Value) error {
			x, ok := from(n)
			if !ok {
				return nativeMismatch(n, v)
			}
			v.Set(reflect.ValueOf(x).Convert(gt))
			return nil
		},
		toNative: func(v reflect.Value) (any, error) { return to(v.Convert(fast).Interface()), nil },
	}
}

func stringsFromNative(n any) (any, bool) {
	xs, ok := n.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		if out[i], ok = x.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

func stringsToNative(x any) any {
	xs := x.([]string)
	out := make([]any, len(xs))
	for i, s := range xs {
		out[i] = s
	}
	return out
}

func stringMapFromNative(n any) (any, bool) {
	xs, ok := n.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(xs))
	for k, x := range xs {
		if out[k], ok = x.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

func stringMapToNative(x any) any {
	xs := x.(map[string]string)
	out := make(map[string]any, len(xs))
	for k, s := range xs {
		out[k] = s
	}
	return out
}

func (pl *avroPlanner) array(at *avroType, gt reflect.Type, path string) (*avroConv, error) {
	if stringItems(at, gt, stringSliceType) {
		return wholeStrings(gt, stringSliceType, stringsFromNative, stringsToNative), nil
	}
	elem, err := pl.conv(at.items, gt.Elem(), path+"[]")
	if err != nil {
		return nil, err
	}
	return &avroConv{
		fromNative: func(n any, v reflect.Value) error {
			xs, ok := n.([]any)
			if !ok {
				return nativeMismatch(n, v)
			}
			s := reflect.MakeSlice(gt, len(xs), len(xs))
			for i, x := range xs {
				if err := elem.fromNative(x, s.Index(i)); err != nil {
					return err
				}
			}
			v.Set(s)
			return nil
		},
		toNative: func(v reflect.Value) (any, error) {
			out := make([]any, v.Len())
			for i := range out {
				x, err := elem.toNative(v.Index(i))
				if err != nil {
					return nil, err
				}
				out[i] = x
			}
			return out, nil
		},
	}, nil
}

func (pl *avroPlanner) mapOf(at *avroType, gt reflect.Type, path string) (*avroConv, error) {
	if stringItems(at, gt, stringMapType) {
		return wholeStrings(gt, stringMapType, stringMapFromNative, stringMapToNative), nil
	}
	elem, err := pl.conv(at.items, gt.Elem(), path+"[]")
	if err != nil {
		return nil, err
	}
	return &avroConv{
		fromNative: func(n any, v reflect.Value) error {
			xs, ok := n.(map[string]any)
			if !ok {
				return nativeMismatch(n, v)
			}
			m := reflect.MakeMapWithSize(gt, len(xs))
			for k, x := range xs {
				e := reflect.New(gt.Elem()).Elem()
				if err := elem.fromNative(x, e); err != nil {
					return err
				}
				m.SetMapIndex(reflect.ValueOf(k).Convert(gt.Key()), e)
			}
			v.Set(m)
			return nil
		},
		toNative: func(v reflect.Value) (any, error) {
			out := make(map[string]any, v.Len())
			for it := v.MapRange(); it.Next(); {
				x, err := elem.toNative(it.Value())
				if err != nil {
					return nil, err
				}
				out[it.Key().String()] = x
			}
			return out, nil
		},
	}, nil
}

// union maps a union of null and one type to a pointer (nil for null),
// and a union of one type to that type. goavro wraps a branch's value in
// a map keyed by the branch's name.
func (pl *avroPlanner) union(at *avroType, gt reflect.Type, path string) (*avroConv, error) {
	var branch *avroType
	nullable := false
	for _, b := range at.branches {
		switch {
		case b.kind == "null":
			nullable = true
		case branch != nil:
			return nil, fmt.Errorf("%s: an Avro union of several types other than null has no Go counterpart here; only [\"null\", T] (a pointer) and [T]", path)
		default:
			branch = b
		}
	}
	if branch == nil {
		return nil, fmt.Errorf("%s: an Avro union of null alone holds nothing", path)
	}
	target := gt
	if nullable {
		if gt.Kind() != reflect.Pointer {
			return nil, fmt.Errorf("%s is a %v, but the Avro union of null and %s maps to a pointer, nil for null", path, gt, branch.describe())
		}
		target = gt.Elem()
	}
	inner, err := pl.conv(branch, target, path)
	if err != nil {
		return nil, err
	}
	key := branch.unionKey()
	return &avroConv{
		fromNative: func(n any, v reflect.Value) error {
			if n == nil {
				v.SetZero()
				return nil
			}
			wrapped, ok := n.(map[string]any)
			if !ok || len(wrapped) != 1 {
				return nativeMismatch(n, v)
			}
			dst := v
			if nullable {
				dst = reflect.New(target).Elem()
			}
			for _, x := range wrapped { // the one branch that is not null
				if err := inner.fromNative(x, dst); err != nil {
					return err
				}
			}
			if nullable {
				v.Set(dst.Addr())
			}
			return nil
		},
		toNative: func(v reflect.Value) (any, error) {
			if nullable {
				if v.IsNil() {
					return nil, nil
				}
				v = v.Elem()
			}
			x, err := inner.toNative(v)
			if err != nil {
				return nil, err
			}
			return map[string]any{key: x}, nil
		},
	}, nil
}
