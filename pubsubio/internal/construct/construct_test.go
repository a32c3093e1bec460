package construct

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func TestDefaultFillsOnlyZero(t *testing.T) {
	a, b := 0, 5
	Default(&a, 3)
	Default(&b, 3)
	if a != 3 || b != 5 {
		t.Errorf("Default gave %d and %d, want 3 and 5", a, b)
	}
}

func TestInvalidWrapsEveryError(t *testing.T) {
	if err := Invalid("api"); err != nil {
		t.Errorf("Invalid with no errors = %v, want nil", err)
	}
	first, second := errors.New("first"), errors.New("second")
	err := Invalid("api", first, second)
	for _, want := range []error{ErrInvalidConfig, first, second} {
		if !errors.Is(err, want) {
			t.Errorf("%v does not wrap %v", err, want)
		}
	}
	if !strings.HasPrefix(err.Error(), "api: invalid configuration: first") {
		t.Errorf("error text %q, want it to start with the API and the first error", err)
	}
}

func TestCheckInput(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	strs := beam.Create(s, "x")
	if err := CheckInput("api", strs, reflect.TypeOf(""), "string", "hint"); err != nil {
		t.Errorf("a PCollection<string> checked as string: %v", err)
	}
	err := CheckInput("api", strs, reflect.TypeOf(0), "int", "pass ints")
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "PCollection<string>, not PCollection<int>; pass ints") {
		t.Errorf("a PCollection<string> checked as int: %v", err)
	}
	if err := CheckInput("api", beam.PCollection{}, reflect.TypeOf(""), "string", "hint"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("an invalid PCollection: %v", err)
	}
}
