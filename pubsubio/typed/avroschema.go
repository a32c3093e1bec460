package typed

import (
	"encoding/json"
	"fmt"
	"strings"
)

// avroType is one type of an Avro schema, as much of it as mapping it to
// Go needs. goavro, which reads and writes the payloads, keeps its parse
// to itself, so the schema is read a second time here; the rules followed
// are goavro's where it departs from the specification (named logical
// types, unknown logical types read as their base type).
type avroType struct {
	kind string // a primitive type's name, or record, enum, fixed, array, map, union
	// logical is the logical type goavro applies (timestamp-millis,
	// timestamp-micros, date, time-millis, time-micros, decimal), else "".
	logical string
	// name is the full name of a record, enum or fixed: how schemas refer
	// to it, and how goavro keys a union branch of it.
	name     string
	fields   []avroField // record
	items    *avroType   // array items, map values
	branches []*avroType // union
	size     int         // fixed
}

type avroField struct {
	name       string
	typ        *avroType
	hasDefault bool
}

// unionKey is how goavro names t as a union branch: its full name, or its
// primitive name with its logical type.
func (t *avroType) unionKey() string {
	switch {
	case t.name != "":
		return t.name
	case t.logical != "":
		return t.kind + "." + t.logical
	}
	return t.kind
}

// describe names t for an error: "record com.example.Order", "long
// (timestamp-millis)", "array".
func (t *avroType) describe() string {
	switch {
	case t.name != "":
		return t.kind + " " + t.name
	case t.logical != "":
		return t.kind + " (" + t.logical + ")"
	}
	return t.kind
}

// The logical types goavro turns into Go values of their own, each on the
// base type it applies to; on another base goavro ignores it.
var avroLogical = map[string]string{
	"timestamp-millis": "long",
	"timestamp-micros": "long",
	"time-micros":      "long",
	"time-millis":      "int",
	"date":             "int",
	"decimal":          "bytes or fixed",
}

var avroPrimitives = map[string]bool{
	"null": true, "boolean": true, "int": true, "long": true, "float": true,
	"double": true, "bytes": true, "string": true,
}

// parseAvroSchema reads an Avro schema's JSON.
func parseAvroSchema(schema string) (*avroType, error) {
	var v any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		return nil, fmt.Errorf("the Avro schema is not JSON: %w", err)
	}
	p := avroParser{named: map[string]*avroType{}, open: map[*avroType]bool{}}
	return p.parse(v, "")
}

type avroParser struct {
	named map[string]*avroType // by full name
	// open holds the records whose fields are being read: a reference to
	// one of them is a record that contains itself. Names resolve only to
	// types defined before them, so that is the only way a cycle forms.
	open map[*avroType]bool
}

func (p avroParser) parse(v any, namespace string) (*avroType, error) {
	switch s := v.(type) {
	case string:
		return p.reference(s, namespace)
	case []any:
		u := &avroType{kind: "union"}
		for _, b := range s {
			t, err := p.parse(b, namespace)
			if err != nil {
				return nil, err
			}
			u.branches = append(u.branches, t)
		}
		return u, nil
	case map[string]any:
		return p.object(s, namespace)
	}
	return nil, fmt.Errorf("%v is not an Avro type (a name, an object or a union)", v)
}

func (p avroParser) reference(name, namespace string) (*avroType, error) {
	if avroPrimitives[name] {
		return &avroType{kind: name}, nil
	}
	if !strings.Contains(name, ".") && namespace != "" {
		if t := p.named[namespace+"."+name]; t != nil {
			return p.closed(t, name)
		}
	}
	if t := p.named[name]; t != nil {
		return p.closed(t, name)
	}
	return nil, fmt.Errorf("type %q is neither a primitive type nor one defined before it", name)
}

// closed returns t, which name refers to, unless t is a record whose
// fields are still being read: a record that contains itself, which is
// refused. goavro reads such a record by recursion, one call per level of
// nesting, and a payload can nest it about as deep as it is long, which
// overflows the stack and ends the process; redelivered, the message would
// end every worker that reads it. A struct need not map the field for
// that to happen: goavro reads every field of the payload.
func (p avroParser) closed(t *avroType, name string) (*avroType, error) {
	if p.open[t] {
		return nil, fmt.Errorf("type %q is record %s, which contains it: records that contain themselves (directly or through other types) are not supported, since a payload could nest them deep enough to overflow the stack", name, t.name)
	}
	return t, nil
}

func (p avroParser) object(m map[string]any, namespace string) (*avroType, error) {
	kind, _ := m["type"].(string)
	if kind == "" {
		// {"type": {...}} or {"type": [...]}: the type is the inner one.
		if inner, ok := m["type"]; ok {
			return p.parse(inner, namespace)
		}
		return nil, fmt.Errorf("an Avro type object has no \"type\": %v", m)
	}
	switch kind {
	case "record", "enum", "fixed":
		return p.define(m, kind, namespace)
	case "array", "map":
		key := map[string]string{"array": "items", "map": "values"}[kind]
		items, err := p.parse(m[key], namespace)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, key, err)
		}
		return &avroType{kind: kind, items: items}, nil
	}
	t, err := p.reference(kind, namespace)
	if err != nil {
		return nil, err
	}
	if lt, _ := m["logicalType"].(string); lt != "" && t.name == "" {
		if base, ok := avroLogical[lt]; ok && (base == t.kind || lt == "decimal" && t.kind == "bytes") {
			t = &avroType{kind: t.kind, logical: lt}
		}
	}
	return t, nil
}

// define defines a record, enum or fixed, registered under its full name
// before its fields are read, as Avro's specification says, so that a
// field referring to it is refused as such (closed) rather than as an
// unknown name.
func (p avroParser) define(m map[string]any, kind, namespace string) (*avroType, error) {
	name, _ := m["name"].(string)
	if name == "" {
		return nil, fmt.Errorf("a %s has no name", kind)
	}
	if ns, ok := m["namespace"].(string); ok && !strings.Contains(name, ".") {
		namespace = ns
	}
	full := name
	if !strings.Contains(name, ".") && namespace != "" {
		full = namespace + "." + name
	}
	if _, dup := p.named[full]; dup {
		return nil, fmt.Errorf("%s %q is defined twice", kind, full)
	}
	if i := strings.LastIndex(full, "."); i >= 0 {
		namespace = full[:i]
	} else {
		namespace = ""
	}
	t := &avroType{kind: kind, name: full}
	p.named[full] = t
	switch kind {
	case "fixed":
		size, _ := m["size"].(float64)
		t.size = int(size)
		if lt, _ := m["logicalType"].(string); lt == "decimal" {
			t.logical = lt
		}
	case "record":
		fields, ok := m["fields"].([]any)
		if !ok {
			return nil, fmt.Errorf("record %q has no \"fields\" array", full)
		}
		p.open[t] = true
		defer delete(p.open, t)
		for i, f := range fields {
			fm, ok := f.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("record %q field %d is not an object", full, i+1)
			}
			fname, _ := fm["name"].(string)
			ft, err := p.parse(fm["type"], namespace)
			if err != nil {
				return nil, fmt.Errorf("record %q field %q: %w", full, fname, err)
			}
			_, hasDefault := fm["default"]
			t.fields = append(t.fields, avroField{name: fname, typ: ft, hasDefault: hasDefault})
		}
	}
	return t, nil
}
