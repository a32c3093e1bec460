package source

import (
	"context"
	"fmt"
)

// When a split may ack what a bundle emitted: once the runner has made the
// bundle's output durable, which runners signal differently. Prism and
// Dataflow persist a residual only with the output of the bundle that
// produced it, so the split's next bundle (the residual's) may ack at once
// (resumeGate, CommitResume). Flink runs a residual at once and makes
// output durable only at checkpoints, which the read learns of from the
// JobManager's REST API (flinkGate, CommitFlinkCheckpoint).

// commitGate decides when a split acks what its bundles emitted. Its
// methods run under the split reader's lock.
type commitGate interface {
	// begin takes in, as bundle rest begins, what the bundle before it
	// emitted (rest.AckIDs), and returns what may be acked now and what no
	// commit will ever cover. An error fails the bundle.
	begin(rest Restriction) (cleared, error)
	// finalized returns what may be acked now that the finalization
	// callback of the bundle that emitted b runs.
	finalized(b emittedBatch) cleared
	// settle returns what may be acked now, between bundles, when a commit
	// is seen.
	settle() cleared
	// waiting reports whether anything waits for the runner's commit.
	waiting() bool
	// acks is the counter of the acks it clears.
	acks() counter
	// release stops what the gate watches.
	release()
}

// emittedBatch is what one bundle of a split emitted.
type emittedBatch struct {
	seq   int64 // the bundle's Seq
	owner string
	ids   []ackID
}

// cleared is a gate's answer: batches to ack (through the held messages
// when this process emitted them, with the RPC otherwise) and batches to
// give back.
type cleared struct {
	ack, void []emittedBatch
}

// emittedBefore is what rest carries: what the bundle before it emitted.
func emittedBefore(rest Restriction) emittedBatch {
	ids := make([]ackID, len(rest.AckIDs))
	for i, id := range rest.AckIDs {
		ids[i] = ackID(id)
	}
	return emittedBatch{seq: rest.Seq - 1, owner: rest.Owner, ids: ids}
}

// resumeGate acks what the bundle before rest emitted as rest begins: the
// runner persisted rest, so it committed that bundle.
type resumeGate struct{}

func (resumeGate) begin(rest Restriction) (cleared, error) {
	if len(rest.AckIDs) == 0 {
		return cleared{}, nil
	}
	return cleared{ack: []emittedBatch{emittedBefore(rest)}}, nil
}

// finalized acks b: the runner finalizes a bundle once it committed it.
func (resumeGate) finalized(b emittedBatch) cleared { return cleared{ack: []emittedBatch{b}} }

func (resumeGate) settle() cleared { return cleared{} }
func (resumeGate) waiting() bool   { return false }
func (resumeGate) acks() counter   { return acksResume }
func (resumeGate) release()        {}

// carryOut acks, under the reader's lock, what c clears and this process
// emitted, counting the acks under counter, and gives back what c voids.
// It returns what another process emitted, for ackRemote.
func (r *splitReader) carryOut(c cleared, counter counter) (remote []ackID) {
	now := r.now()
	for _, b := range c.ack {
		if b.owner != processID {
			remote = append(remote, b.ids...)
			continue
		}
		r.stats.add(counter, r.ledger.ack(b.ids, b.seq, now))
	}
	for _, b := range c.void {
		if b.owner == processID {
			r.ledger.giveBackEmitted(b.ids, b.seq)
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
		remote = r.carryOut(r.gate.settle(), r.gate.acks())
	}
	r.mu.Unlock()
	r.ackRemoteNow(remote)
}

// finalized acks what the gate clears now that the finalization callback
// of bundle seq, which emitted ids, runs.
func (r *splitReader) finalized(seq int64, ids []ackID) {
	r.mu.Lock()
	remote := r.carryOut(r.gate.finalized(emittedBatch{seq: seq, owner: processID, ids: ids}), acksFinalization)
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
	return r.gate.waiting()
}

// errCannotAck says which split cannot ack, and why: the gate's begin
// failed the bundle.
func errCannotAck(r *splitReader, err error) error {
	return fmt.Errorf("pubsubio.Read: split %d of %s cannot ack: %w", r.split.Index, r.split.Subscription, err)
}
