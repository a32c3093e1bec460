package model

import (
	"strconv"
	"strings"
	"testing"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
)

// The properties below restate Pub/Sub's naming rules by hand, without the
// package's regular expressions, so a fuzzed name that the parser accepts
// and the rules refuse (or the reverse) shows up as a disagreement.

// projectIDOK is Google Cloud's project ID rule: 6-30 characters of
// lowercase letters, digits and hyphens, starting with a letter and not
// ending with a hyphen, optionally behind a legacy "domain:" prefix, a
// domain name of dot-separated labels of 1-63 characters, 253 at most.
func projectIDOK(p string) bool {
	if i := strings.LastIndexByte(p, ':'); i >= 0 {
		domain := p[:i]
		if len(domain) > 253 {
			return false
		}
		for _, label := range strings.Split(domain, ".") {
			if label == "" || len(label) > 63 {
				return false
			}
			for _, r := range label {
				if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
					return false
				}
			}
		}
		p = p[i+1:]
	}
	if len(p) < 6 || len(p) > 30 || p[0] < 'a' || p[0] > 'z' || p[len(p)-1] == '-' {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// resourceIDOK is Pub/Sub's topic and subscription ID rule: 3-255
// characters of letters, digits and -_.~+%, starting with a letter, not
// starting with "goog" in any case.
func resourceIDOK(id string) bool {
	if len(id) < 3 || len(id) > 255 || strings.HasPrefix(strings.ToLower(id), "goog") {
		return false
	}
	if c := id[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.~+%", r)) {
			return false
		}
	}
	return true
}

// checkParse holds every property of one parse of name: the parser never
// panics (the fuzzer reports a panic as a failure); it accepts exactly the
// names of the form projects/P/<collection>/ID whose parts obey the rules;
// an accepted name round-trips through String(); a rejected one gets an
// error quoting the value at fault, the whole name or the bad part, cut to
// maxQuotedName.
func checkParse(t *testing.T, name, collection string, parse func(string) (string, error)) {
	t.Helper()
	got, err := parse(name)
	parts := strings.Split(name, "/")
	shaped := len(parts) == 4 && parts[0] == "projects" && parts[2] == collection
	valid := shaped && projectIDOK(parts[1]) && resourceIDOK(parts[3])
	if err == nil {
		if !valid {
			t.Fatalf("parsing %q succeeded, but the name breaks Pub/Sub's naming rules", name)
		}
		if got != name {
			t.Fatalf("parsing %q then String() gives %q", name, got)
		}
		return
	}
	if valid {
		t.Fatalf("parsing %q failed although the name obeys the rules: %v", name, err)
	}
	msg := err.Error()
	quotes := func(s string) bool { return strings.Contains(msg, strconv.Quote(text.Truncate(s, maxQuotedName))) }
	if !shaped {
		if !quotes(name) {
			t.Fatalf("error for malformed %q does not quote it: %v", name, err)
		}
		return
	}
	if !quotes(parts[1]) && !quotes(parts[3]) {
		t.Fatalf("error for %q quotes neither the project nor the ID: %v", name, err)
	}
}

func addNameSeeds(f *testing.F, collection string) {
	for _, s := range []string{
		"projects/my-project/" + collection + "/orders",
		"projects/example.com:legacy-proj/" + collection + "/a.b~c+d%e_f-g",
		"projects/my-project/" + collection + "/",
		"projects/My-Project/" + collection + "/orders",
		"projects/my-project/" + collection + "/goog-x",
		"projects/my-project/" + collection + "/GOOGx",
		"projects/my-proj-/" + collection + "/abc",
		"projects/:my-project/" + collection + "/abc",
		"projects/my-project/" + collection + "/orders/extra",
		"projects/my-project/" + collection + "/ab\n",
		"projects/my-project\n/" + collection + "/abc",
		"projects/my-project/" + collection + "/" + strings.Repeat("a", 255),
		"projects/my-project/" + collection + "/" + strings.Repeat("a", 256),
		"projects/my-project/" + collection + "/ordérs",
		"orders",
		"",
		"////",
	} {
		f.Add(s)
	}
}

// resourceName is what ParseSubscription and ParseTopic return.
type resourceName interface {
	String() string
	Validate() error
}

// fuzzParser fuzzes parse, the parser of names in collection: every
// property of checkParse, and an accepted name passes its own Validate.
func fuzzParser(f *testing.F, collection string, parse func(string) (resourceName, error)) {
	addNameSeeds(f, collection)
	f.Fuzz(func(t *testing.T, name string) {
		checkParse(t, name, collection, func(n string) (string, error) {
			r, err := parse(n)
			if err == nil && r.Validate() != nil {
				t.Fatalf("parsing %q gives %+v, which its own Validate rejects: %v", n, r, r.Validate())
			}
			return r.String(), err
		})
	})
}

func FuzzParseSubscription(f *testing.F) {
	fuzzParser(f, "subscriptions", func(n string) (resourceName, error) { return ParseSubscription(n) })
}

func FuzzParseTopic(f *testing.F) {
	fuzzParser(f, "topics", func(n string) (resourceName, error) { return ParseTopic(n) })
}

// FuzzValidateName covers the names built with TopicOf and SubscriptionOf,
// whose parts may hold a "/" that a parsed name cannot: Validate accepts
// exactly what the rules accept, and its error quotes the part at fault,
// cut to maxQuotedName.
func FuzzValidateName(f *testing.F) {
	f.Add("my-project", "orders")
	f.Add("my-project", "a/b")
	f.Add("projects/x", "orders")
	f.Add("example.com:legacy-proj", "goog")
	f.Add(strings.Repeat("a", 2000)+":my-project", "orders")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, project, id string) {
		for _, err := range []error{TopicOf(project, id).Validate(), SubscriptionOf(project, id).Validate()} {
			valid := projectIDOK(project) && resourceIDOK(id)
			switch {
			case err == nil && !valid:
				t.Fatalf("Validate accepted project %q, ID %q, which break Pub/Sub's naming rules", project, id)
			case err != nil && valid:
				t.Fatalf("Validate rejected project %q, ID %q, which obey the rules: %v", project, id, err)
			case err != nil:
				bad := id
				if !projectIDOK(project) {
					bad = project
				}
				if !strings.Contains(err.Error(), strconv.Quote(text.Truncate(bad, maxQuotedName))) {
					t.Fatalf("Validate(%q, %q) error does not quote %q: %v", project, id, bad, err)
				}
			}
		}
	})
}
