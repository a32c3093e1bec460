package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateCutsOnARuneBoundary(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg..."},
		{strings.Repeat("é", 10), 10, "ééé..."}, // 2-byte runes: a cut at 7 would split one
		{"abcdef", 2, "..."},
	} {
		got := Truncate(tc.s, tc.max)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
		}
	}
}
