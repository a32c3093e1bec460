package prepare

import (
	"strings"
	"testing"
)

// The examples of Pub/Sub's filtering page pass; what cannot be a filter is
// refused, saying where.
func TestFilterSyntax(t *testing.T) {
	for _, f := range []string{
		`attributes:domain`,
		`NOT attributes:domain`,
		`-attributes:domain`,
		`attributes.domain = "com"`,
		`attributes.domain != "com"`,
		`attributes.domain="com"`,
		`NOT attributes.domain = "com"`,
		`hasPrefix(attributes.domain, "co")`,
		`NOT hasPrefix(attributes.domain, "co")`,
		`attributes:domain AND attributes.domain = "com"`,
		`(attributes:domain AND attributes.domain = "com") OR attributes:lang`,
		`NOT (attributes:a OR attributes:b)`,
		`attributes."iana.org/language_tag" = "en"`,
		`attributes:"iana.org/language_tag"`,
		`attributes.my-key = "v"`,
		`attributes.kind = "a \"quoted\" value"`,
		"attributes:a\tAND\nattributes:b",
	} {
		if why := filterSyntaxError(f); why != "" {
			t.Errorf("filter %q refused: %s", f, why)
		}
	}
	for _, tc := range []struct{ filter, want string }{
		{`attributes.kind = "order`, "an unterminated string"},
		{`(attributes:kind`, `expected ")" at byte 16, found the end`},
		{`attributes:kind)`, `expected AND, OR or the end at byte 15, found ")"`},
		{`attributes:kind AND`, "expected a condition"},
		{`AND attributes:kind`, "expected a condition"},
		{`kind = "order"`, `expected "(" after a function name`},
		{`attributes.kind = order`, `expected a quoted string at byte 18, found "order"`},
		{`attributes.kind`, `expected "=" or "!=" after attributes.KEY at byte 15, found the end`},
		{`attributes.kind == "x"`, `expected a quoted string at byte 17, found "="`},
		{`attributes:kind && attributes:x`, `found '&'`},
		{`hasPrefix(attributes.kind "p")`, `expected "," or ")"`},
		{`attributes`, `expected ":" or "." after attributes`},
		{`attributes:`, "expected an attribute key"},
	} {
		if why := filterSyntaxError(tc.filter); !strings.Contains(why, tc.want) {
			t.Errorf("filter %q: %q, want it to say %q", tc.filter, why, tc.want)
		}
	}
}
