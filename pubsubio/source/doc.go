// Package source is pubsubio's read path: a splittable DoFn that reads one
// or more Pub/Sub subscriptions on any portable Beam runner and acks a
// message only after the runner has committed the bundle that emitted it.
//
// Pub/Sub has no offsets, so a split carries no position: it is one
// streaming-pull connection to one subscription, held in a process-wide
// registry that outlives bundles. What a restriction carries instead is the
// ack IDs the previous bundle emitted. A residual exists only once the runner
// has committed that bundle, so the next bundle of the split acks them first
// thing.
//
// The life of a message, and the file of each step:
//
//   - Before any split reads, the prepare step (internal/prepare, run by
//     prepare_fn.go) runs once per job: it describes every subscription,
//     rejects those the read cannot consume, creates missing ones that
//     have create options and seeks those with a start position, then
//     emits one element per split (splitplan.go). The subscriptions a
//     read creates for topics are its own: refused when another job's,
//     marked when taken up, and deleted when a read of a generated name is
//     done (readdone.go). It warns about dead-letter policies that
//     leave the read little room. Their options (setup.go) are validated
//     at construction (validate.go, plan.go).
//   - A split's first bundle finds its reader in the registry
//     (registry.go), which starts the subscriber (splitreader.go) on a
//     connection that records what its streaming pulls receive (puller.go,
//     pulled.go).
//   - The client's callback (intake.go) turns each message into a
//     delivery, decodes it once (decode.go: event time and payload format)
//     and buffers it within the buffer budget (budget.go, which also sizes
//     flow control from it), waiting for room or, when the budget stays
//     full, withholding it without its payload until a bundle makes room
//     for it (withheld.go). It counts redeliveries and the delivery
//     attempts Pub/Sub reports.
//   - Each bundle (bundle.go, readfn.go) acks what the bundles before it
//     emitted as far as the runner has made their output durable, by its
//     runner's signal (internal/commit: the split's next bundle on Prism
//     and Dataflow, a completed checkpoint on Flink; gate.go carries out
//     its answers), takes what is buffered, emits it at its event time
//     (or as a dead letter, under DecodePolicy), and checkpoints with the
//     ack IDs it emitted (restriction.go); it moves the watermark
//     (watermark.go), which holds while the split's stream fails
//     (health.go), and counts, or dead-letters under LatePolicy
//     (policies.go), what it emits behind it.
//   - The ledger (acklifecycle.go) holds every delivery from its arrival
//     until it is acked (through the held message, with the Acknowledge RPC
//     when the residual resumed in another process (ackid.go), or by a
//     finalization callback where the SDK delivers them, gate.go
//     and internal/commit) or given back: the message a failed bundle
//     failed on with the RPC (the rest is requeued for the retry,
//     requeue.go), when the subscriber stops, when the split is released
//     for LeaseIdle (not while its bundle runs) or because its worker
//     stopped during a bundle (readfn.go), or when it was held for
//     MaxExtension (holds.go). The watermark waits for what was given back until it is
//     seen again (givenback.go). On a subscription with exactly-once
//     delivery, Pub/Sub answers each ack, and the bundle that sent it
//     counts the answer (exactlyonce.go).
//   - Under Tracing, a delivery's receive span runs from its arrival to
//     its ack or give-back (trace.go).
//   - Each split reader watches its subscription's backlog, which a
//     process-wide sampler asks Cloud Monitoring for once a minute
//     (backlog.go, internal/backlog); the samples are the splits' progress
//     and size and the backlog gauges (backlogprogress.go), and hold the
//     watermark while an old message waits (backlogwatermark.go).
//   - A split of a bounded read ends after its last acks; once all have,
//     the read's output is complete, and a read acking at Flink
//     checkpoints (internal/commit) ends its job with a drain
//     (readdone.go).
//   - acklatency.go measures emission to ack; metrics.go reports to Beam.
package source
