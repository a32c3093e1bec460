// Package dedup removes messages already seen from a PCollection of
// messages, on every runner: the key is Message.ID or an attribute the
// publisher sets, remembered for a horizon by the runner's per-key state,
// which a timer per key clears. Package pubsubio re-exports it as
// Deduplicate and DedupConfig.
//
// The state lives in the runner. Dataflow and Flink checkpoint it with the
// pipeline; Prism keeps it in memory, so a crash of the Prism process
// starts it empty and copies arriving after that pass.
package dedup
