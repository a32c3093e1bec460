// Package text cuts strings that pubsubio quotes in errors, logs and
// attributes to a bounded length.
package text

import "unicode/utf8"

// Truncate returns s cut to at most max bytes on a rune boundary, with
// "..." marking a cut.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ellipsis = "..."
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if cut < 0 {
		cut = 0
	}
	return s[:cut] + ellipsis
}
