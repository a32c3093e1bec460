package source

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"

	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/commit"
)

// The split reader's side of the commit gate (internal/commit): it hands
// the gate what each bundle emitted and carries out its answers.

// emittedBefore is what rest carries: what the bundle before it emitted.
func emittedBefore(rest Restriction) commit.Batch {
	return commit.Batch{Seq: rest.Seq - 1, Local: rest.Owner == processID, IDs: rest.AckIDs}
}

// carryOut acks, under the reader's lock, what c clears and this process
// emitted, counting the acks under counter, and gives back what c voids.
// It returns what another process emitted, for ackRemote.
func (r *splitReader) carryOut(c commit.Cleared, counter counter) (remote []ackID) {
	now := r.now()
	for _, b := range c.Ack {
		if !b.Local {
			remote = append(remote, ackIDsFrom(b.IDs)...)
			continue
		}
		r.stats.add(counter, r.ledger.ack(ackIDsFrom(b.IDs), b.Seq, now))
	}
	for _, b := range c.Void {
		if b.Local {
			r.ledger.giveBackEmitted(ackIDsFrom(b.IDs), b.Seq)
		}
	}
	return remote
}

// settleCommitted acks what the gate clears now that the runner committed
// more, between bundles.
func (r *splitReader) settleCommitted() {
	r.mu.Lock()
	var remote []ackID
	if !r.released {
		remote = r.carryOut(r.gate.Settle(), r.gateAcks)
	}
	r.mu.Unlock()
	r.ackRemoteNow(remote)
}

// finalized acks what the gate clears now that the finalization callback
// of bundle seq, which emitted ids, runs.
func (r *splitReader) finalized(seq int64, ids []ackID) {
	r.mu.Lock()
	remote := r.carryOut(r.gate.Finalized(commit.Batch{Seq: seq, Local: true, IDs: ackIDStrings(ids)}), acksFinalization)
	r.mu.Unlock()
	r.ackRemoteNow(remote)
}

// ackRemoteNow acks ids with the RPC outside a bundle, bounded by
// ShutdownTimeout.
func (r *splitReader) ackRemoteNow(ids []ackID) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer cancel()
	r.ackRemote(ctx, ids)
}

// waitingForCommit reports whether the split holds acks that wait for the
// runner's commit.
func (r *splitReader) waitingForCommit() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gate.Waiting()
}

// errCannotAck says which split cannot ack, and why: the gate's Begin
// failed the bundle.
func errCannotAck(r *splitReader, err error) error {
	return fmt.Errorf("pubsubio.Read: split %d of %s cannot ack: %w", r.split.Index, r.split.Subscription, err)
}

// useFinalization decides at graph construction whether the read DoFn
// declares bundle finalization (internal/commit says why it may not). The
// launcher and the workers run the same binary, so the SDK version
// compiled in is the workers' too.
func useFinalization(mode FinalizationMode, sdkVersion string) bool {
	switch mode {
	case FinalizationOn:
		return true
	case FinalizationOff:
		return false
	}
	return commit.DeliversFinalization(sdkVersion)
}

// sdkVersion is the Beam SDK compiled into this binary.
var sdkVersion = core.SdkVersion
