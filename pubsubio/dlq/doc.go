// Package dlq holds the dead-letter contract shared by pubsubio's read and
// write paths: FailedMessage, one value per message that a failure policy
// routed instead of failing the bundle. Both directions emit the same type,
// so one downstream transform (a dead-letter topic, a table, a log) serves
// every source and sink of a pipeline.
//
// A transform that publishes a PCollection of FailedMessage to a
// dead-letter topic belongs here too; it is not written yet.
package dlq
