package model

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
)

// Pub/Sub's own naming rules, so that a bad name fails at graph construction
// instead of as INVALID_ARGUMENT on a worker. Project IDs: 6-30 characters,
// lowercase letters, digits and hyphens, starting with a letter (legacy
// domain-scoped IDs start with a domain name, "example.com:", of at most 253
// characters). Topic and subscription IDs:
// 3-255 characters from [A-Za-z0-9-_.~+%], starting with a letter, not
// starting with "goog".
var (
	projectIDPattern  = regexp.MustCompile(`^([a-z0-9-]{1,63}(\.[a-z0-9-]{1,63})*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	resourceIDPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$`)
)

// Subscription names a Pub/Sub subscription.
type Subscription struct {
	Project string
	ID      string
}

// SubscriptionOf returns the subscription id in project. It does not
// validate; Read does, naming the value.
func SubscriptionOf(project, id string) Subscription {
	return Subscription{Project: project, ID: id}
}

// ParseSubscription parses "projects/P/subscriptions/S".
func ParseSubscription(name string) (Subscription, error) {
	p, id, err := parseName(name, "subscriptions")
	if err != nil {
		return Subscription{}, err
	}
	return Subscription{Project: p, ID: id}, nil
}

// String returns the full resource name, "projects/P/subscriptions/S".
func (s Subscription) String() string {
	return "projects/" + s.Project + "/subscriptions/" + s.ID
}

// IsZero reports whether s is unset.
func (s Subscription) IsZero() bool { return s == Subscription{} }

// Validate reports whether s is a well-formed subscription name.
func (s Subscription) Validate() error {
	return validateName(s.Project, s.ID, "subscription")
}

// Topic names a Pub/Sub topic.
type Topic struct {
	Project string
	ID      string
}

// TopicOf returns the topic id in project. It does not validate; Write does,
// naming the value.
func TopicOf(project, id string) Topic {
	return Topic{Project: project, ID: id}
}

// ParseTopic parses "projects/P/topics/T".
func ParseTopic(name string) (Topic, error) {
	p, id, err := parseName(name, "topics")
	if err != nil {
		return Topic{}, err
	}
	return Topic{Project: p, ID: id}, nil
}

// String returns the full resource name, "projects/P/topics/T".
func (t Topic) String() string {
	return "projects/" + t.Project + "/topics/" + t.ID
}

// IsZero reports whether t is unset.
func (t Topic) IsZero() bool { return t == Topic{} }

// Validate reports whether t is a well-formed topic name.
func (t Topic) Validate() error {
	return validateName(t.Project, t.ID, "topic")
}

func parseName(name, collection string) (project, id string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != collection {
		return "", "", fmt.Errorf("%q is not a resource name of the form projects/PROJECT/%s/ID", text.Truncate(name, maxQuotedName), collection)
	}
	if err := validateName(parts[1], parts[3], strings.TrimSuffix(collection, "s")); err != nil {
		return "", "", err
	}
	return parts[1], parts[3], nil
}

// maxQuotedName bounds how much of a name an error quotes: more than any
// valid one.
const maxQuotedName = 300

// maxDomainBytes is a domain name's limit (RFC 1035), for the prefix of a
// domain-scoped project ID.
const maxDomainBytes = 253

func validateName(project, id, kind string) error {
	if i := strings.LastIndex(project, ":"); i > maxDomainBytes {
		return fmt.Errorf("%s project %q has a domain prefix of %d bytes, over a domain name's %d", kind, text.Truncate(project, maxQuotedName), i, maxDomainBytes)
	}
	if !projectIDPattern.MatchString(project) {
		return fmt.Errorf("%s project %q is not a valid Google Cloud project ID (6-30 lowercase letters, digits or hyphens, starting with a letter)", kind, text.Truncate(project, maxQuotedName))
	}
	if !resourceIDPattern.MatchString(id) || strings.HasPrefix(strings.ToLower(id), "goog") {
		return fmt.Errorf("%s ID %q is invalid: Pub/Sub IDs are 3-255 characters of letters, digits and -_.~+%%, start with a letter and do not start with \"goog\"", kind, text.Truncate(id, maxQuotedName))
	}
	return nil
}
