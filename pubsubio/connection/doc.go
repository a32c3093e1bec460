// Package connection is the one place that builds Pub/Sub clients for
// pubsubio's source, sink and dead-letter writer, so that all three reach the
// same service as the same identity, decided by explicit configuration only.
//
// The Go client also takes its destination from the environment: when
// PUBSUB_EMULATOR_HOST is set, the apiv1 constructors redirect every client to
// that address in plaintext and without credentials. A value left behind on a
// worker would silently send a production job's messages there. This package
// therefore dials the gRPC connection itself and hands it to the client with
// option.WithGRPCConn, which the client's transport uses as it is, whatever
// options the emulator hook adds (client.go gives the details).
//
// Credentials are named by a key file path that is read on the worker, never
// by the key itself: Settings travels inside the serialized pipeline graph, so
// a key there would be readable by anyone who can see the job.
package connection
