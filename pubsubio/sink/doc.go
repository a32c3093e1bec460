// Package sink is pubsubio's write path: a DoFn that publishes Messages to
// Pub/Sub topics, confirms every one of them before its bundle commits, and
// repairs what it can on the way.
//
// Per writer (one DoFn instance) it holds one client and a bounded LRU of
// per-topic publishers, created lazily, so one Write serves any number of
// destinations (Message.Topic overrides the default topic). Publishes are
// admitted under two in-flight caps, messages and serialized bytes; at a cap
// ProcessElement blocks until completions free room. FinishBundle flushes
// every publisher and waits for every result under a progress budget, so a
// bundle commits only after Pub/Sub has confirmed, or a failure policy has
// routed, everything it accepted: at-least-once.
//
// Publish results complete on the client's goroutines; they are handed to
// the DoFn's goroutine and classified there (routing.go):
//   - NOT_FOUND: the messages are parked, the topic is created
//     (CreateIfNeeded) and they are republished with backoff (repair.go);
//   - INVALID_ARGUMENT for a batch: each message is republished alone, and
//     only a message rejected alone reaches the failure policy;
//   - an ordering key the client paused: what it cancelled is parked, the
//     key resumed and the messages republished in publish order;
//   - anything else (an outage) fails the bundle: a runner that retries
//     bundles publishes it again; Prism fails the job.
//
// One file per concern: config.go (options, defaults, validation),
// write.go and convert.go (graph construction), writefn.go (the DoFn),
// writer.go (the per-instance core), backend.go (the client, behind the
// interfaces tests fake), completions.go (verdicts handed to the DoFn's
// goroutine), publishers.go (the LRU), inflight.go (the caps), progress.go
// (bounded waits and the drain), repair.go, routing.go (classification and
// failure policy), validate.go (Pub/Sub's limits, checked before sending),
// release.go (bounded publisher shutdown), metrics.go.
package sink
