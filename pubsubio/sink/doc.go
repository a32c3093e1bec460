// Package sink is pubsubio's write path: a DoFn that publishes Messages to
// Pub/Sub topics, confirms every one of them before its bundle commits, and
// repairs what it can on the way.
//
// Per writer (one DoFn instance) it holds one client and a bounded LRU of
// per-topic publishers, created lazily, so one Write serves any number of
// destinations (Message.Topic overrides the default topic). A message to a
// destination with no publisher while the cache is full waits in that
// destination's group, which is published through one publisher once it
// fills a batch, at MaxGroupedMessages or MaxInFlightBytes, or at the end
// of the bundle, so batching survives more destinations than publishers.
// Messages are admitted under two in-flight caps, messages sent and
// serialized bytes (grouped ones included); at a cap ProcessElement blocks
// until completions free room. FinishBundle publishes the groups, flushes every publisher and
// waits for every result under a progress budget, so a bundle commits only
// after Pub/Sub has confirmed, or a failure policy has routed, everything
// it accepted: at-least-once.
//
// Publish results complete on the client's goroutines; they are handed to
// the DoFn's goroutine and classified there:
//   - NOT_FOUND: the messages are parked, the topic is created
//     (CreateIfNeeded) and they are republished with backoff;
//   - INVALID_ARGUMENT for a batch: each message is republished alone, and
//     only a message rejected alone reaches the failure policy;
//   - an ordering key the client paused: what it cancelled is parked, the
//     key resumed and the messages republished in publish order;
//   - anything else (an outage) fails the bundle.
//
// What a failed bundle means depends on the runner: Prism fails the job,
// Dataflow retries the bundle and Flink restores from its last checkpoint.
// A retried bundle publishes its messages again, so messages are
// at-least-once.
package sink
