// Package source is pubsubio's read path: a splittable DoFn that reads one
// or more Pub/Sub subscriptions on any portable Beam runner and acks a
// message only after the runner has committed the bundle that emitted it.
//
// Pub/Sub has no offsets, so a split carries no position: it is one
// streaming-pull connection to one subscription, held in a process-wide
// registry that outlives bundles. What a restriction carries instead is the
// ack IDs the previous bundle emitted. A residual exists only once the runner
// has committed that bundle, so the next bundle of the split acks them first
// thing. Bundle finalization is used only on SDK versions that deliver it
// (finalization.go explains the Beam Go 2.77 defect).
//
// Before any split reads, the prepare step (prepare.go, preparefn.go) runs
// once per job on a worker: it describes every subscription, rejects those
// the read cannot consume (checks.go), creates missing ones that have create
// options (createoptions.go) and seeks those with a start position
// (startposition.go), and only then emits one element per split.
package source
