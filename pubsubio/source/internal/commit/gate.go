// Package commit decides when a split of the read acks what its bundles
// emitted: once the runner has made a bundle's output durable, which
// runners signal differently. Prism and Dataflow persist a residual only
// with the output of the bundle that produced it, so the split's next
// bundle, the residual's, may ack at once (Resume). Flink runs a residual
// at once and makes output durable only at checkpoints, which the read
// learns of from the JobManager's REST API (Checkpoint). Where the SDK
// delivers bundle finalization, its callback acks sooner (Watch guards
// against a harness that loses callbacks).
package commit

// Gate decides when a split acks what its bundles emitted. The split's
// reader calls it under its lock.
type Gate interface {
	// Begin takes in, as bundle seq begins, what the bundle before it
	// emitted, and returns what may be acked now and what no commit will
	// ever cover. An error fails the bundle.
	Begin(seq int64, before Batch) (Cleared, error)
	// Finalized returns what may be acked now that the finalization
	// callback of the bundle that emitted b runs.
	Finalized(b Batch) Cleared
	// Settle returns what may be acked now, between bundles, when a commit
	// is seen.
	Settle() Cleared
	// Waiting reports whether anything waits for the runner's commit.
	Waiting() bool
	// Release stops what the gate watches.
	Release()
}

// Batch is what one bundle of a split emitted.
type Batch struct {
	Seq int64 // the bundle's Seq
	// Local is whether the bundle ran in this process, which then holds
	// the messages; another process's can be acked only with the RPC.
	Local bool
	IDs   []string // ack IDs
}

// Cleared is a gate's answer: batches to ack, and batches to give back
// because no commit will cover them.
type Cleared struct {
	Ack, Void []Batch
}

// Resume acks what the bundle before seq emitted as seq begins: the runner
// persisted seq's restriction, the residual of that bundle, so it
// committed that bundle.
type Resume struct{}

// Begin acks before.
func (Resume) Begin(_ int64, before Batch) (Cleared, error) {
	if len(before.IDs) == 0 {
		return Cleared{}, nil
	}
	return Cleared{Ack: []Batch{before}}, nil
}

// Finalized acks b: the runner finalizes a bundle once it committed it.
func (Resume) Finalized(b Batch) Cleared { return Cleared{Ack: []Batch{b}} }

// Settle clears nothing: nothing waits.
func (Resume) Settle() Cleared { return Cleared{} }

// Waiting reports false: nothing waits.
func (Resume) Waiting() bool { return false }

// Release does nothing.
func (Resume) Release() {}
