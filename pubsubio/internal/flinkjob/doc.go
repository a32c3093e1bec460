// Package flinkjob follows a Flink job's checkpoints through its
// JobManager's REST API, for the read's commit gate on Flink: what a bundle
// emitted may be acked once a completed checkpoint holds it.
//
// Flink runs a bundle's successor at once and makes output durable only at
// checkpoints: the output and residual of bundle N have left the task
// before bundle N+1 begins, so a checkpoint triggered after N+1 began holds
// them. The read marks that moment with a Stamp and asks a Watcher to
// judge it. The rules, on the JobManager's clock and its checkpoint IDs
// only, never the worker's clock:
//
//   - A stamp is resolved by the JobManager's clock (the "now" of GET
//     /jobs/<id>) read by a poll that began after the stamp was made.
//   - A resolved stamp is covered once a checkpoint, or a savepoint that
//     stops the job, triggered after that time has completed, newer than
//     the checkpoint the job last restored from.
//   - A restore rolls output back, so it voids every stamp made before the
//     watcher saw it; so does a new job ID (a JobManager restarted without
//     HA), which the watcher looks up by the job's name when its ID stops
//     answering.
//   - A failed request (5xx, a timeout, a reset connection) delays acks.
//     Only an answer that says so concludes that checkpointing is off
//     (ErrCheckpointingOff). With no successful poll for a patience, Err
//     says what was tried (ErrNoAnswer); acks resume with the next answer.
//
// One Watcher per JobManager and job serves every read of a process.
package flinkjob
