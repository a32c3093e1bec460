package typed

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// avroFieldPlan maps one struct field to one record field.
type avroFieldPlan struct {
	index int // in the struct
	name  string
	conv  *avroConv
}

// record maps a record to a struct, field by field (avroTag, matchField).
func (pl *avroPlanner) record(at *avroType, gt reflect.Type, path string) (*avroConv, error) {
	var plans []avroFieldPlan
	var errs []error
	taken := map[string]string{} // record field -> struct field
	for i := range gt.NumField() {
		sf := gt.Field(i)
		tag := sf.Tag.Get(avroTag)
		fpath := path + "." + sf.Name
		switch {
		case tag == "-":
			continue
		case sf.Anonymous:
			errs = append(errs, fmt.Errorf("%s is embedded, which the Avro mapping does not flatten: name the field, or tag it `avro:\"-\"`", fpath))
			continue
		case !sf.IsExported():
			continue
		}
		f, err := matchField(at, sf.Name, tag)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", fpath, err))
			continue
		case f == nil && pl.lenient:
			continue
		case f == nil && tag != "":
			errs = append(errs, fmt.Errorf("%s: its tag names field %q, which record %s does not have", fpath, tag, at.name))
			continue
		case f == nil:
			errs = append(errs, fmt.Errorf("%s: record %s has no field of that name, even ignoring case: tag it `avro:\"name\"`, or `avro:\"-\"` to leave it out", fpath, at.name))
			continue
		}
		if other, dup := taken[f.name]; dup {
			errs = append(errs, fmt.Errorf("%s and %s.%s both map to field %q of record %s", fpath, path, other, f.name, at.name))
			continue
		}
		taken[f.name] = sf.Name
		conv, err := pl.conv(f.typ, sf.Type, fpath)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		plans = append(plans, avroFieldPlan{index: i, name: f.name, conv: conv})
	}
	if pl.dir == encoding {
		for _, f := range at.fields {
			if _, ok := taken[f.name]; !ok && !f.hasDefault {
				errs = append(errs, fmt.Errorf("%s: field %q of record %s has no default, and no field of %v maps to it", path, f.name, at.name, gt))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &avroConv{
		fromNative: func(n any, v reflect.Value) error {
			rec, ok := n.(map[string]any)
			if !ok {
				return nativeMismatch(n, v)
			}
			for _, p := range plans {
				if x, ok := rec[p.name]; ok {
					if err := p.conv.fromNative(x, v.Field(p.index)); err != nil {
						return err
					}
				}
			}
			return nil
		},
		toNative: func(v reflect.Value) (any, error) {
			rec := make(map[string]any, len(plans))
			for _, p := range plans {
				x, err := p.conv.toNative(v.Field(p.index))
				if err != nil {
					return nil, err
				}
				rec[p.name] = x
			}
			return rec, nil
		},
	}, nil
}

// avroTag is the struct tag naming a field's record field: `avro:"name"`,
// or `avro:"-"` for a field the mapping skips.
const avroTag = "avro"

// matchField finds the record field a struct field maps to: the one its
// tag names; else the one with its name; else the one whose name equals
// it ignoring case, if only one does. It returns nil when none does.
func matchField(at *avroType, goName, tag string) (*avroField, error) {
	want := goName
	if tag != "" {
		want = tag
	}
	for i := range at.fields {
		if at.fields[i].name == want {
			return &at.fields[i], nil
		}
	}
	if tag != "" {
		return nil, nil
	}
	var found *avroField
	for i := range at.fields {
		if strings.EqualFold(at.fields[i].name, goName) {
			if found != nil {
				return nil, fmt.Errorf("record %s has fields %q and %q, which both match it ignoring case: tag it `avro:\"name\"`", at.name, found.name, at.fields[i].name)
			}
			found = &at.fields[i]
		}
	}
	return found, nil
}
