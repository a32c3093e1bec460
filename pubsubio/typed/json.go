package typed

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// jsonCodec is model.FormatJSON: encoding/json, into and from values of t.
type jsonCodec struct{ t reflect.Type }

// checkJSONType returns why encoding/json cannot handle values of t: a
// channel, function or complex number anywhere in it. Marshalling the
// zero value finds them, since the encoder refuses such a type even
// where the value is nil.
func checkJSONType(t reflect.Type) error {
	if _, err := json.Marshal(reflect.New(t).Elem().Interface()); err != nil {
		var ute *json.UnsupportedTypeError
		if errors.As(err, &ute) {
			return fmt.Errorf("encoding/json (Format %s) cannot handle the element type %v: it holds a %v; give that field a `json:\"-\"` tag or another type", model.FormatJSON, t, ute.Type)
		}
	}
	return nil
}

func (c jsonCodec) decode(data []byte, _ Encoding) (any, error) {
	v := reflect.New(c.t)
	if err := json.Unmarshal(data, v.Interface()); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("the payload is not JSON: %w (at byte %d of %d)", err, se.Offset, len(data))
		}
		return nil, fmt.Errorf("the payload does not decode into %v: %w", c.t, err)
	}
	return v.Elem().Interface(), nil
}

func (c jsonCodec) encode(v any, _ Encoding) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the value does not encode as JSON: %w", err)
	}
	return b, nil
}
