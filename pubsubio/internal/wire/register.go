package wire

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// RegisterCoder makes enc and dec T's Beam coder, so that T reaches a
// runner as opaque bytes, and registers both functions' shims, which
// spare the coder a reflective call per element. Call it from an init
// function of the package that declares T.
func RegisterCoder[T any](enc func(T) []byte, dec func([]byte) (T, error)) {
	register.Function1x1(enc)
	register.Function1x2(dec)
	beam.RegisterCoder(reflect.TypeOf((*T)(nil)).Elem(), enc, dec)
}
