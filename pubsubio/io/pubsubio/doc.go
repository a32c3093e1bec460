// Package pubsubio is a drop-in replacement for Beam Go's
// github.com/apache/beam/sdks/v2/go/pkg/beam/io/pubsubio, built on
// pubsubio's read and write, so that a pipeline written for Beam's package
// runs on every runner (Prism, Flink, Dataflow) after one changed import:
//
//	import "github.com/pubsubio/beam-pubsubio/pubsubio/io/pubsubio"
//
// It has exactly Beam's exported API: Read(s, project, ReadOptions)
// returning a PCollection<[]byte>, or PCollection<*pb.PubsubMessage> with
// WithAttributes, and Write(s, project, topic, col) for either, with the
// same panics for the same misuse. pb.PubsubMessage is the type of
// cloud.google.com/go/pubsub/v2/apiv1/pubsubpb, which Beam's
// google.golang.org/genproto/googleapis/pubsub/v1 is an alias of (the
// genproto package no longer exists in the genproto versions that
// pubsub/v2 requires: code naming the type through it imports pubsubpb
// instead).
//
// What each option does here:
//   - Topic: the read creates a subscription of its own on the topic
//     (pubsubio's ReadConfig.Topics: labelled, expiring a day after the
//     job stops); only what is published after the job started is read.
//   - Subscription: the subscription is read.
//   - TimestampAttribute: each message's event time is taken from it
//     (Unix milliseconds or RFC 3339), else the publish time.
//   - IDAttribute: messages are deduplicated on it (pubsubio.Deduplicate,
//     10 minutes of processing time, state in the runner).
//   - WithAttributes: elements are *pb.PubsubMessage with data,
//     attributes, message ID, publish time and ordering key.
//
// The API has no configuration, so flags say where to connect:
// --pubsubio_emulator=host:port (PUBSUB_EMULATOR_HOST is ignored) and
// --pubsubio_credentials_file (a service-account key on the workers;
// default: application-default credentials).
//
// On Dataflow (--runner=dataflow), Read and Write emit the same native
// transforms as Beam's package, so a migrated Dataflow job is the job it
// was; --pubsubio_portable_on_dataflow uses the portable implementation
// there too.
package pubsubio
