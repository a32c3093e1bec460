// Package text cuts strings that pubsubio quotes in errors, logs and
// attributes to a bounded length, and finds where a string stops being
// UTF-8.
package text

import "unicode/utf8"

// MaxQuoted is how much of a value from the user or a message an error
// quotes: enough to recognise it, never a whole payload.
const MaxQuoted = 64

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

// InvalidUTF8At returns the offset of the first byte of s that does not
// start a valid UTF-8 sequence, or -1 when s is valid UTF-8.
func InvalidUTF8At[T string | []byte](s T) int {
	b := []byte(s)
	for at := 0; at < len(b); {
		r, size := utf8.DecodeRune(b[at:])
		if r == utf8.RuneError && size <= 1 {
			return at
		}
		at += size
	}
	return -1
}
