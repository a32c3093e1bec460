// Package option holds what every pubsubio configuration does with its
// fields before validating them.
package option

// Default sets *field to def when it holds its zero value: an unset option
// takes its documented default.
func Default[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}
