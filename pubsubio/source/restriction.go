package source

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
)

// Restriction is what one bundle of a split hands the next. Pub/Sub has no
// position to resume from, so it carries the ack IDs the bundle emitted:
// the runner persists a residual only after committing the bundle that
// produced it, so whoever processes the residual may ack them.
type Restriction struct {
	// Seq numbers the bundles of a split. Seeing a Seq again means the
	// runner is retrying a bundle whose output it discarded.
	Seq int64
	// Owner identifies the worker process that emitted AckIDs: there they
	// are acked through the held messages (stopping lease extension), in any
	// other process with the Acknowledge RPC.
	Owner string
	// AckIDs were emitted by the bundle before this one.
	AckIDs []string
	// Emitted counts what the split emitted before this restriction, for
	// bounded reads.
	Emitted int64
	// Final marks the last restriction of a bounded read: its bundle only
	// acks AckIDs and ends the split.
	Final bool
}

// finishClaim is claimed by the final bundle of a bounded split, after which
// the tracker is done and the split ends.
type finishClaim struct{}

// tracker tracks one bundle of a split. Claims are the ack IDs of emitted
// messages; the self-checkpoint (TrySplit(0)) moves them into the residual.
type tracker struct {
	rest         Restriction
	owner        string
	claimed      []ackID
	claimedBytes int64
	finishing    bool // the residual ends the read (bounded reads)
	done         bool
	err          error
	// remaining is the split's remaining work while it runs, set by its
	// bundle when the read samples backlog (backlogprogress.go).
	remaining func() float64
}

func newTracker(rest Restriction, owner string) *tracker {
	return &tracker{rest: rest, owner: owner}
}

// TryClaim claims a *delivery, the message the bundle emits, or, with
// finishClaim, ends the split.
func (t *tracker) TryClaim(pos any) bool {
	if t.done {
		return false
	}
	switch p := pos.(type) {
	case *delivery:
		t.claimed = append(t.claimed, p.ackID)
		t.claimedBytes += p.size
		return true
	case finishClaim:
		t.done = true
		return false
	default:
		t.err = fmt.Errorf("pubsubio.Read: the tracker cannot claim %T; this is a bug", pos)
		return false
	}
}

// finishAfterThisBundle makes the residual the split's final, ack-only
// restriction.
func (t *tracker) finishAfterThisBundle() { t.finishing = true }

// TrySplit refuses every split but the self-checkpoint: there is no
// position to divide, and a runner-initiated split would hand half of
// nothing to someone else.
func (t *tracker) TrySplit(fraction float64) (primary, residual any, err error) {
	if t.done || fraction > 0 {
		return t.rest, nil, nil
	}
	t.done = true
	res := Restriction{
		Seq:     t.rest.Seq + 1,
		Owner:   t.owner,
		AckIDs:  ackIDStrings(t.claimed),
		Emitted: t.rest.Emitted + int64(len(t.claimed)),
		Final:   t.finishing,
	}
	prim := t.rest
	prim.Final = true
	return prim, res, nil
}

// GetProgress reports the bytes of the claimed messages as done work and,
// while the split runs, its share of its subscription's backlog bytes as
// remaining (backlogprogress.go); one unit without a sample: a stream's
// remaining work is unknown, and 0 would tell the runner the split is
// finished.
func (t *tracker) GetProgress() (done, remaining float64) {
	done = float64(t.claimedBytes)
	switch {
	case t.done:
		return done, 0
	case t.remaining != nil:
		return done, t.remaining()
	}
	return done, 1
}

func (t *tracker) IsDone() bool        { return t.done }
func (t *tracker) GetError() error     { return t.err }
func (t *tracker) GetRestriction() any { return t.rest }
func (t *tracker) IsBounded() bool     { return t.rest.Final }
func (t *tracker) claimedIDs() []ackID { return t.claimed }

var _ sdf.BoundableRTracker = (*tracker)(nil)

// processID identifies this worker process in the restrictions it emits, so
// that a residual resuming here acks through the held messages and one
// resuming elsewhere uses the Acknowledge RPC.
var processID = newProcessID()

func newProcessID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic("pubsubio.Read: no randomness for the process ID: " + err.Error())
	}
	return hex.EncodeToString(b)
}
