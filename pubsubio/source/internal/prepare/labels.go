package prepare

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
)

// Pub/Sub's rules for resource labels
// (https://cloud.google.com/pubsub/docs/labels).
const (
	maxLabels      = 64
	maxLabelLength = 63 // characters, for keys and values alike
)

// labelProblems returns one error per label Pub/Sub would refuse, naming
// it ("Labels[\"Key\"] ..."), in key order; and one if there are too many.
func labelProblems(labels map[string]string) []error {
	var errs []error
	if len(labels) > maxLabels {
		errs = append(errs, fmt.Errorf("%s has %d labels, over Pub/Sub's %d", "Labels", len(labels), maxLabels))
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		name := fmt.Sprintf("Labels[%q]", text.Truncate(k, text.MaxQuoted))
		if why := labelKeyProblem(k); why != "" {
			errs = append(errs, fmt.Errorf("%s: the key %s", name, why))
		}
		if why := labelValueProblem(labels[k]); why != "" {
			errs = append(errs, fmt.Errorf("%s: the value %q %s", name, text.Truncate(labels[k], text.MaxQuoted), why))
		}
	}
	return errs
}

// labelKeyProblem says why Pub/Sub would refuse k as a label key, or "".
func labelKeyProblem(k string) string {
	if k == "" {
		return "is empty"
	}
	if r, _ := utf8.DecodeRuneInString(k); !labelLetter(r) {
		return "must start with a lowercase letter"
	}
	return labelValueProblem(k)
}

// labelValueProblem says why Pub/Sub would refuse v as a label value (or
// as the rest of a key), or "".
func labelValueProblem(v string) string {
	switch {
	case !utf8.ValidString(v):
		return "is not valid UTF-8"
	case utf8.RuneCountInString(v) > maxLabelLength:
		return fmt.Sprintf("is %d characters, over Pub/Sub's %d", utf8.RuneCountInString(v), maxLabelLength)
	case strings.IndexFunc(v, func(r rune) bool { return !labelRune(r) }) >= 0:
		return "may hold only lowercase letters, digits, \"_\" and \"-\""
	}
	return ""
}

// labelLetter reports whether r is a lowercase letter, or a letter of a
// script without case (Pub/Sub allows international characters).
func labelLetter(r rune) bool {
	return unicode.IsLower(r) || unicode.IsLetter(r) && !unicode.IsUpper(r) && !unicode.IsTitle(r)
}

func labelRune(r rune) bool { return labelLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' }

// labelValue turns s into a valid label value: lowercased, every character
// Pub/Sub does not allow replaced by "-", cut to the maximum length.
func labelValue(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range strings.ToLower(s) {
		if n == maxLabelLength {
			break
		}
		if !labelRune(r) {
			r = '-'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
