package sink

import (
	"context"
	"fmt"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The writer talks to Pub/Sub through these three interfaces, which are the
// slice of the client it uses: production wires them to *pubsub.Client
// (clientBackend), unit tests to an in-memory fake.

// backend opens publishers and creates topics.
type backend interface {
	// publisher returns a new publisher for topic, with the writer's
	// settings applied.
	publisher(topic model.Topic) publisher
	// createTopic creates a topic; the caller treats ALREADY_EXISTS as
	// success.
	createTopic(ctx context.Context, t *pubsubpb.Topic) error
	// close releases the backend's connection.
	close() error
}

// publisher is one topic's batching publisher: *pubsub.Publisher's methods.
type publisher interface {
	// publish hands msg to the batcher and returns at once.
	publish(msg *pubsub.Message) result
	// flush sends every batch now and returns when they are all handled.
	flush()
	// resume lets an ordering key the publisher paused after a failure
	// accept messages again.
	resume(orderingKey string)
	// stop sends what is batched, waits for it and stops the publisher's
	// goroutines. It may not return (publishercache.go bounds it).
	stop()
}

// result is one publish's outcome: *pubsub.PublishResult.
type result interface {
	Ready() <-chan struct{}
	Get(ctx context.Context) (serverID string, err error)
}

// clientBackend is the production backend: one *pubsub.Client per writer,
// built by connection.NewClient (which ignores PUBSUB_EMULATOR_HOST).
type clientBackend struct {
	client *pubsub.Client
	cfg    Config
}

// newBackend builds a writer's backend: the production client, or a fake in
// tests.
var newBackend = func(ctx context.Context, cfg Config) (backend, error) {
	return newClientBackend(ctx, cfg)
}

func newClientBackend(ctx context.Context, cfg Config) (*clientBackend, error) {
	c, err := connection.NewClient(ctx, cfg.clientProject(), cfg.Connection)
	if err != nil {
		return nil, fmt.Errorf("pubsubio.Write: %w", err)
	}
	// The retry backoff is client-wide in the Go client: every publisher of
	// this client resolves TopicAdminClient.CallOptions.Publish per batch.
	// The client is this writer's own, so setting it here touches no one
	// else.
	c.TopicAdminClient.CallOptions.Publish = cfg.Publisher.publishCallOptions()
	return &clientBackend{client: c, cfg: cfg}, nil
}

func (b *clientBackend) publisher(topic model.Topic) publisher {
	p := b.client.Publisher(topic.String())
	p.PublishSettings = b.cfg.Publisher.publishSettings()
	p.EnableMessageOrdering = b.cfg.Publisher.EnableMessageOrdering
	return clientPublisher{p}
}

// createTopic uses the client's admin stub, under Connection.RPCTimeout.
// The Go client opens it on the same connection as the publishers, so
// there is nothing to open or close for a repair, and no admin call is
// made unless a publish saw NOT_FOUND.
func (b *clientBackend) createTopic(ctx context.Context, t *pubsubpb.Topic) error {
	return b.cfg.Connection.Call(ctx, "pubsubio.Write", "CreateTopic "+t.GetName(), func(ctx context.Context) error {
		_, err := b.client.TopicAdminClient.CreateTopic(ctx, t)
		return err
	})
}

func (b *clientBackend) close() error { return b.client.Close() }

// clientPublisher adapts *pubsub.Publisher.
type clientPublisher struct{ p *pubsub.Publisher }

// publish passes a background context: the client uses it only for flow
// control (not enabled here) and tracing, and the batch's RPC runs under
// its own Timeout-bounded context whatever is passed.
func (c clientPublisher) publish(msg *pubsub.Message) result {
	return c.p.Publish(context.Background(), msg)
}
func (c clientPublisher) flush()                    { c.p.Flush() }
func (c clientPublisher) resume(orderingKey string) { c.p.ResumePublish(orderingKey) }
func (c clientPublisher) stop()                     { c.p.Stop() }
