package prepare

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// PositionKind says where a read of a subscription starts.
type PositionKind string

const (
	// PositionResume (default) reads from wherever the subscription is:
	// its unacked backlog, then new messages. Nothing is sought.
	PositionResume PositionKind = "RESUME"
	// PositionEarliestRetained replays everything the subscription still
	// retains: it seeks to Pub/Sub's longest retention (31 days) ago.
	PositionEarliestRetained PositionKind = "EARLIEST_RETAINED"
	// PositionLatest drops the backlog: it seeks to the moment the seek
	// runs, by the worker's clock.
	PositionLatest PositionKind = "LATEST"
	// PositionTimestamp seeks to StartPosition.Time: messages published
	// before it count as acked, those after as unacked.
	PositionTimestamp PositionKind = "TIMESTAMP"
	// PositionSnapshot seeks to StartPosition.Snapshot: the unacked backlog
	// captured by the snapshot plus everything published since.
	PositionSnapshot PositionKind = "SNAPSHOT"
)

// maxRetention is the longest Pub/Sub retains a message, on a subscription
// or a topic. Seeking this far back reaches everything still retained:
// Pub/Sub accepts a time before its retention window and marks only what it
// still holds as unacked.
const maxRetention = 31 * 24 * time.Hour

// StartPosition is where the read of one subscription starts. The zero
// value is PositionResume. Every other position seeks the subscription,
// once per job, in the prepare step, before any split reads:
//
//   - A seek is state shared by every consumer of the subscription, other
//     jobs included: use a non-default position only on a subscription this
//     job owns.
//   - A seek happens when a job starts, never when a split resumes or the
//     runner retries a bundle of the read. A redeploy (a new job, including
//     a job cancelled and started again) seeks again.
//   - How far back a backwards position (earliest retained, a timestamp)
//     reaches is a property of the subscription: acked messages come back
//     only if it retains acked messages or its topic retains messages.
//     Otherwise only never-acked messages are recovered; the prepare step
//     warns when it sees that combination.
//   - Pub/Sub applies a seek asynchronously: deliveries already in flight
//     can take up to a minute to reflect it.
type StartPosition struct {
	// Kind is the position; empty means PositionResume.
	Kind PositionKind
	// Time is the timestamp of PositionTimestamp, and set with no other kind.
	Time time.Time
	// Snapshot names the snapshot of PositionSnapshot: an ID in the
	// subscription's project, or "projects/P/snapshots/S". Set with no other
	// kind. The snapshot must be of the subscription's topic.
	Snapshot string
}

// withDefault returns p with an empty Kind read as PositionResume.
func (p StartPosition) withDefault() StartPosition {
	if p.Kind == "" {
		p.Kind = PositionResume
	}
	return p
}

// seeks reports whether p moves the subscription at all.
func (p StartPosition) seeks() bool { return p.Kind != PositionResume }

// backwards reports whether p may mark acked messages unacked again, which
// only reaches what the subscription or its topic retains.
func (p StartPosition) backwards() bool {
	return p.Kind == PositionEarliestRetained || p.Kind == PositionTimestamp
}

// validate checks p for sub; field is how errors name it. Errors name the
// value and what is allowed.
func (p StartPosition) validate(field string, sub model.Subscription) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(field+": "+format, args...))
	}
	switch p.Kind {
	case PositionResume, PositionEarliestRetained, PositionLatest:
	case PositionTimestamp:
		if p.Time.IsZero() {
			bad("Kind %s needs Time: set it to the instant to replay from (StartFromTimestamp)", p.Kind)
		} else if timestamppb.New(p.Time).CheckValid() != nil {
			// The graph carries Time as RFC 3339, which has four-digit years.
			bad("Time %v is outside years 1 to 9999, which Pub/Sub's timestamps and the pipeline's encoding cover; use a time in the past", p.Time)
		}
	case PositionSnapshot:
		if p.Snapshot == "" {
			bad("Kind %s needs Snapshot: name the snapshot to seek to (StartFromSnapshot)", p.Kind)
		} else if _, err := snapshotName(p.Snapshot, sub); err != nil {
			bad("Snapshot: %v", err)
		}
	default:
		bad("Kind %q is unknown; use %q (default), %q, %q, %q or %q", text.Truncate(string(p.Kind), text.MaxQuoted),
			PositionResume, PositionEarliestRetained, PositionLatest, PositionTimestamp, PositionSnapshot)
		return errs
	}
	if !p.Time.IsZero() && p.Kind != PositionTimestamp {
		bad("Time %v is set but Kind is %s, which does not use it; use Kind %s or clear Time", p.Time, p.Kind, PositionTimestamp)
	}
	if p.Snapshot != "" && p.Kind != PositionSnapshot {
		bad("Snapshot %q is set but Kind is %s, which does not use it; use Kind %s or clear Snapshot", text.Truncate(p.Snapshot, text.MaxQuoted), p.Kind, PositionSnapshot)
	}
	return errs
}

// warning explains a valid position that probably does not do what its
// user meant, or "" when there is nothing to say. now is the construction
// time.
func (p StartPosition) warning(field string, now time.Time) string {
	if p.Kind == PositionTimestamp && p.Time.After(now) {
		return fmt.Sprintf("%s: Time %v is in the future: when the job starts, the seek marks every message published before it as acked, "+
			"so the read drops the whole backlog as with %s; it does not wait until then, and messages published after the job starts are read as usual. "+
			"To replay, use a time in the past", field, p.Time.UTC().Format(time.RFC3339), PositionLatest)
	}
	return ""
}

// seekRequest is the Seek that moves sub to p, resolved at now (the
// worker's clock, for PositionLatest and PositionEarliestRetained).
func (p StartPosition) seekRequest(sub model.Subscription, now time.Time) *pubsubpb.SeekRequest {
	req := &pubsubpb.SeekRequest{Subscription: sub.String()}
	switch p.Kind {
	case PositionEarliestRetained:
		req.Target = &pubsubpb.SeekRequest_Time{Time: timestamppb.New(now.Add(-maxRetention))}
	case PositionLatest:
		req.Target = &pubsubpb.SeekRequest_Time{Time: timestamppb.New(now)}
	case PositionTimestamp:
		req.Target = &pubsubpb.SeekRequest_Time{Time: timestamppb.New(p.Time)}
	case PositionSnapshot:
		name, _ := snapshotName(p.Snapshot, sub) // validated at construction
		req.Target = &pubsubpb.SeekRequest_Snapshot{Snapshot: name}
	}
	return req
}

// describe names p in logs and errors.
func (p StartPosition) describe() string {
	switch p.Kind {
	case PositionTimestamp:
		return fmt.Sprintf("%s %s", p.Kind, p.Time.UTC().Format(time.RFC3339Nano))
	case PositionSnapshot:
		return fmt.Sprintf("%s %s", p.Kind, p.Snapshot)
	}
	return string(p.Kind)
}

// snapshotName resolves a snapshot ID or full name to the full name; an ID
// is in sub's project. Snapshot IDs follow the subscription naming rules.
func snapshotName(name string, sub model.Subscription) (string, error) {
	project, id := sub.Project, name
	if strings.Contains(name, "/") {
		parts := strings.Split(name, "/")
		if len(parts) != 4 || parts[0] != "projects" || parts[2] != "snapshots" {
			return "", fmt.Errorf("%q is neither a snapshot ID nor a name of the form projects/PROJECT/snapshots/ID", text.Truncate(name, text.MaxQuoted))
		}
		project, id = parts[1], parts[3]
	}
	// A snapshot ID obeys the same rules as a subscription ID.
	if err := model.SubscriptionOf(project, id).Validate(); err != nil {
		why := strings.Replace(err.Error(), "subscription", "snapshot", 1)
		if id != name {
			why = fmt.Sprintf("%q is not a snapshot's name: %s", text.Truncate(name, text.MaxQuoted), why)
		}
		return "", errors.New(why)
	}
	return "projects/" + project + "/snapshots/" + id, nil
}
