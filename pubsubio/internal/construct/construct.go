// Package construct holds what every pubsubio transform does at graph
// construction: fill in the defaults of its configuration, check its input,
// and report what is wrong as one error that wraps ErrInvalidConfig.
package construct

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// ErrInvalidConfig is wrapped by every error a pubsubio transform returns
// at graph construction; package pubsubio exports it.
var ErrInvalidConfig = errors.New("invalid configuration")

// Default sets *field to def when it holds its zero value: an unset option
// takes its documented default. Every option of every configuration takes
// its default this way, so that zero always means "unset".
func Default[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Invalid returns nil when errs holds no error, else one error for api
// ("pubsubio.Read") that wraps ErrInvalidConfig and every error of errs.
func Invalid(api string, errs ...error) error {
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w: %w", api, ErrInvalidConfig, err)
}

// CheckInput returns the construction error of api when col is not a valid
// PCollection of want, which users know as wantName; hint says what to pass
// instead.
func CheckInput(api string, col beam.PCollection, want reflect.Type, wantName, hint string) error {
	if !col.IsValid() {
		return Invalid(api, errors.New("the input PCollection is not valid"))
	}
	if t := col.Type().Type(); t != want {
		return Invalid(api, fmt.Errorf("the input is a PCollection<%v>, not PCollection<%s>; %s", t, wantName, hint))
	}
	return nil
}

// UniqueValid reports, for each of names (which the option field lists,
// each a kind: "subscription"), whether it is valid and listed for the
// first time; bad says why not.
func UniqueValid[T interface {
	comparable
	Validate() error
}](field, kind string, names []T, bad func(format string, args ...any)) []bool {
	ok := make([]bool, len(names))
	seen := map[T]bool{}
	for i, n := range names {
		switch err := n.Validate(); {
		case err != nil:
			bad("%s[%d]: %w", field, i, err)
		case seen[n]:
			bad("%s[%d]: %s is listed twice; each %s is read once", field, i, n, kind)
		default:
			seen[n], ok[i] = true, true
		}
	}
	return ok
}
