package pubsubio

import (
	"context"

	"cloud.google.com/go/pubsub/v2"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
)

// NewClient returns a Pub/Sub client for project that connects as Read and
// Write do with conn: to conn's emulator endpoint in plaintext, or to
// Pub/Sub with conn's key file or application-default credentials; never
// where PUBSUB_EMULATOR_HOST points. Use it outside the pipeline, to create
// topics and subscriptions or to publish and pull in tests; close it when
// done.
func NewClient(ctx context.Context, project string, conn Connection) (*pubsub.Client, error) {
	return connection.NewClient(ctx, project, conn)
}

// MetricsNamespace is the Beam metrics namespace of every metric the
// connector reports; query a job's results by it.
const MetricsNamespace = metrics.Namespace
