package construct

import (
	"slices"
	"testing"
	"time"
)

func TestCheckBounds(t *testing.T) {
	errs := CheckBounds(
		Bound[time.Duration]{Option: "In", Value: time.Second, Min: time.Second, Max: time.Minute},
		Bound[time.Duration]{Option: "Off", Value: 0, Min: time.Second, Max: time.Minute, Zero: "for off"},
		Bound[time.Duration]{Option: "Bare", Value: 30, Min: time.Second, Max: time.Minute},
		Bound[time.Duration]{Option: "Long", Value: time.Hour, Min: time.Second, Max: time.Minute, Zero: "for off"},
	)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	want := []string{
		"Bare 30ns must be between 1s and 1m0s (a bare number is nanoseconds: write 30 * time.Second, not 30)",
		"Long 1h0m0s must be between 1s and 1m0s, or 0 for off",
	}
	if !slices.Equal(got, want) {
		t.Errorf("CheckBounds = %q, want %q", got, want)
	}
	if errs := CheckBounds(Bound[int]{Option: "Splits", Value: 1 << 30, Min: 1, Max: 1000}); len(errs) != 1 || errs[0].Error() != "Splits 1073741824 must be between 1 and 1000" {
		t.Errorf("CheckBounds(Splits 1<<30) = %v", errs)
	}
}
