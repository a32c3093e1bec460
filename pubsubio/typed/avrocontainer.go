package typed

import (
	"fmt"
	"reflect"
)

// Arrays, maps and unions: the Avro types that hold others.

func (pl *avroPlanner) array(at *avroType, gt reflect.Type, path string) (*avroConv, error) {
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
