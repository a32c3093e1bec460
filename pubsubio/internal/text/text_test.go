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

func TestInvalidUTF8At(t *testing.T) {
	for s, want := range map[string]int{"": -1, "café": -1, "caf\xe9": 3, "\xff": 0, "ok\xc3": 2, "a\xe2\x82": 1} {
		if got := InvalidUTF8At(s); got != want {
			t.Errorf("InvalidUTF8At(%q) = %d, want %d", s, got, want)
		}
		if got := InvalidUTF8At([]byte(s)); got != want {
			t.Errorf("InvalidUTF8At([]byte(%q)) = %d, want %d", s, got, want)
		}
	}
}
