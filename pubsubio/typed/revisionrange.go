package typed

import (
	"fmt"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// revisionRange is the revisions of its schema a topic validates
// messages against: from FirstRevisionId to LastRevisionId of its schema
// settings, both included, by creation time; an unset bound leaves its
// side open, as Pub/Sub's SchemaSettings document.
type revisionRange struct{ first, last string }

func rangeOf(settings *pubsubpb.SchemaSettings) revisionRange {
	return revisionRange{settings.GetFirstRevisionId(), settings.GetLastRevisionId()}
}

func (r revisionRange) String() string {
	switch {
	case r.first == "" && r.last == "":
		return "every revision"
	case r.last == "":
		return "revisions from FirstRevisionId " + r.first + " on"
	case r.first == "":
		return "revisions up to LastRevisionId " + r.last
	}
	return "revisions from FirstRevisionId " + r.first + " to LastRevisionId " + r.last
}

// accepted returns the revisions of revs that r holds, in revs' order, or
// why it cannot tell: revision IDs carry no order, so each bound is looked
// up among revs for its creation time, and one that is none of them (a
// deleted revision) leaves the range unknown.
func (r revisionRange) accepted(revs []*pubsubpb.Schema) ([]*pubsubpb.Schema, error) {
	created := func(id, option string) (*pubsubpb.Schema, error) {
		if id == "" {
			return nil, nil
		}
		for _, rev := range revs {
			if rev.GetRevisionId() == id {
				return rev, nil
			}
		}
		return nil, fmt.Errorf("the topic's %s %s is none of the schema's %d revisions, so which it accepts is unknown: set the topic's schema settings to revisions that exist", option, id, len(revs))
	}
	first, err := created(r.first, "FirstRevisionId")
	if err != nil {
		return nil, err
	}
	last, err := created(r.last, "LastRevisionId")
	if err != nil {
		return nil, err
	}
	var out []*pubsubpb.Schema
	for _, rev := range revs {
		at := rev.GetRevisionCreateTime().AsTime()
		if (first == nil || !at.Before(first.GetRevisionCreateTime().AsTime())) && (last == nil || !at.After(last.GetRevisionCreateTime().AsTime())) {
			out = append(out, rev)
		}
	}
	return out, nil
}
