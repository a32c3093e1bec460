package construct

import (
	"fmt"
	"time"
)

// Bound is the range an option's value must fall in, Min and Max included.
type Bound[T int | int64 | time.Duration] struct {
	Option          string
	Value, Min, Max T
	// Zero, if set, accepts 0 and says what it means ("for no idle bound"):
	// for an option whose zero is a mode that survives defaulting.
	Zero string
}

// CheckBounds returns one error per bound whose value is out of range,
// naming the option, the value and the range. A duration under a
// microsecond is almost always an untyped number read as nanoseconds, and
// its error says so.
func CheckBounds[T int | int64 | time.Duration](bounds ...Bound[T]) []error {
	var errs []error
	for _, b := range bounds {
		if b.Value >= b.Min && b.Value <= b.Max || b.Zero != "" && b.Value == 0 {
			continue
		}
		hint := ""
		if b.Zero != "" {
			hint = ", or 0 " + b.Zero
		}
		if d, ok := any(b.Value).(time.Duration); ok && d > 0 && d < time.Microsecond {
			hint += " (a bare number is nanoseconds: write 30 * time.Second, not 30)"
		}
		errs = append(errs, fmt.Errorf("%s %v must be between %v and %v%s", b.Option, b.Value, b.Min, b.Max, hint))
	}
	return errs
}
