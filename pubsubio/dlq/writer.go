package dlq

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/publishing"
)

// writer is the runtime state of one writeFn instance: one client, one
// publisher for the dead-letter topic, and the dead letters of the current
// bundle that Pub/Sub has not confirmed yet. Every method runs on the
// DoFn's goroutine.
type writer struct {
	cfg    Config
	client *pubsub.Client
	pub    *pubsub.Publisher

	// unconfirmed are the publishes of this bundle not yet waited for.
	unconfirmed []*pubsub.PublishResult
	flusher     publishing.Flusher

	stats stats

	// Replaceable in tests.
	now   func() time.Time
	warnf func(ctx context.Context, format string, args ...any)
}

// newWriter builds the writer's client with connection.NewClient, so
// PUBSUB_EMULATOR_HOST is ignored and cfg.Connection alone decides where
// and as whom it connects.
func newWriter(ctx context.Context, cfg Config) (*writer, error) {
	client, err := connection.NewClient(ctx, cfg.Topic.Project, cfg.Connection)
	if err != nil {
		return nil, fmt.Errorf("dlq.Write: %w", err)
	}
	pub := client.Publisher(cfg.Topic.String())
	pub.PublishSettings = pubsub.DefaultPublishSettings
	pub.PublishSettings.Timeout = publishTimeout(cfg)
	return &writer{cfg: cfg, client: client, pub: pub, stats: newStats(), now: time.Now, warnf: log.Warnf}, nil
}

// publishTimeout bounds the client's retries of one batch. It is longer
// than FlushTimeout, so that a wait expires before the publishes it waits
// for and reports FlushTimeout, and it is bounded, so that a publish a
// failed wait abandoned does not linger much beyond it.
func publishTimeout(cfg Config) time.Duration { return 2 * cfg.FlushTimeout }

// startBundle forgets what a failed bundle left unconfirmed: its elements
// are being retried, so waiting for its publishes (or failing this bundle
// for them) would be waiting on behalf of a bundle that no longer exists.
func (w *writer) startBundle() {
	clear(w.unconfirmed)
	w.unconfirmed = w.unconfirmed[:0]
	w.stats.stalled = 0
}

// process publishes f's envelope and, when the bundle has
// MaxInFlightMessages unconfirmed, waits for all of them.
func (w *writer) process(ctx context.Context, f FailedMessage) error {
	env := Encode(f, w.cfg.Topic)
	// The context only carries tracing to the client; the batch's RPC runs
	// under the publisher's own Timeout-bounded context.
	res := w.pub.Publish(context.Background(), &pubsub.Message{Data: env.Data, Attributes: env.Attributes})
	w.unconfirmed = append(w.unconfirmed, res)
	if max := w.cfg.MaxInFlightMessages; max > 0 && len(w.unconfirmed) >= max {
		err := w.wait(ctx, fmt.Sprintf("%d dead letters reached MaxInFlightMessages", len(w.unconfirmed)))
		w.stats.report(ctx, len(w.unconfirmed))
		return err
	}
	if w.stats.throttle.Due(w.now()) {
		w.stats.report(ctx, len(w.unconfirmed))
	}
	return nil
}

// finishBundle waits until Pub/Sub confirmed every dead letter of the
// bundle: only then may the bundle commit.
func (w *writer) finishBundle(ctx context.Context) error {
	err := w.wait(ctx, "flushing at the end of the bundle")
	w.stats.report(ctx, len(w.unconfirmed))
	return err
}

// wait flushes the publisher and waits for every unconfirmed publish,
// bounded by FlushTimeout. Whatever it returns, nothing is unconfirmed
// afterwards: a failure fails the bundle, and its publishes are abandoned
// to the client (not cancelled, so some may still land: a retried bundle
// can duplicate them).
func (w *writer) wait(ctx context.Context, what string) error {
	unconfirmed := w.unconfirmed
	if len(unconfirmed) == 0 {
		return nil // no wait: the last-wait metric keeps the last real one
	}
	w.unconfirmed = nil
	w.flusher.Flush(w.pub.Flush)
	start := w.now()
	defer func() { w.stats.wait(w.now().Sub(start)) }()
	timer := time.NewTimer(w.cfg.FlushTimeout)
	defer timer.Stop()
	for _, r := range unconfirmed {
		select {
		case <-r.Ready():
		case <-timer.C:
			confirmed := w.confirmed(unconfirmed)
			w.stats.stalled = int64(len(unconfirmed) - confirmed)
			return fmt.Errorf("dlq.Write: Pub/Sub confirmed %d of %d dead letters to %s within FlushTimeout %v (%s): check the topic's reachability and quota, or raise FlushTimeout",
				confirmed, len(unconfirmed), w.cfg.Topic, w.cfg.FlushTimeout, what)
		case <-ctx.Done():
			w.confirmed(unconfirmed)
			return fmt.Errorf("dlq.Write: %s with %d dead letters unconfirmed: %w", what, len(unconfirmed), ctx.Err())
		}
		if _, err := r.Get(context.Background()); err != nil { // ready: returns at once
			w.confirmed(unconfirmed)
			return w.publishError(err)
		}
	}
	w.stats.published.Add(int64(len(unconfirmed)))
	w.stats.stalled = 0
	return nil
}

// confirmed counts the publishes among unconfirmed that Pub/Sub has
// confirmed by now, after a wait ended early, and adds them to the
// published count.
func (w *writer) confirmed(unconfirmed []*pubsub.PublishResult) int {
	n := 0
	for _, r := range unconfirmed {
		select {
		case <-r.Ready():
			if _, err := r.Get(context.Background()); err == nil {
				n++
			}
		default:
		}
	}
	w.stats.published.Add(int64(n))
	return n
}

// publishError explains a failed publish of a dead letter.
func (w *writer) publishError(err error) error {
	code, _ := grpccode.Of(err)
	switch code {
	case codes.NotFound:
		return fmt.Errorf("dlq.Write: the dead-letter topic %s does not exist: create it and a subscription to it, or fix Config.Topic (dlq.Write never creates its topic): %w", w.cfg.Topic, err)
	case codes.DeadlineExceeded:
		return fmt.Errorf("dlq.Write: Pub/Sub did not confirm dead letters to %s within the publish timeout (twice FlushTimeout %v): check the topic's reachability and quota, or raise FlushTimeout: %w", w.cfg.Topic, w.cfg.FlushTimeout, err)
	case codes.PermissionDenied:
		return fmt.Errorf("dlq.Write: publishing to %s was denied (PERMISSION_DENIED): grant Config.Connection's identity roles/pubsub.publisher on the topic: %w", w.cfg.Topic, err)
	}
	return fmt.Errorf("dlq.Write: publishing dead letters to %s failed with %s after the client's retries: %w", w.cfg.Topic, grpccode.Name(code), err)
}

// close stops the publisher, bounded by ShutdownTimeout, and closes the
// client (Teardown). A stop that overruns is abandoned: logged and counted
// process-wide, because Teardown has no metrics context; a later bundle in
// the process reports it.
func (w *writer) close(ctx context.Context) error {
	stop := func() {
		w.flusher.Wait()
		w.pub.Stop()
	}
	if abandoned := publishing.StopAll(w.cfg.ShutdownTimeout, stop); len(abandoned) > 0 {
		shutdownsAbandoned.Add(1)
		w.warnf(ctx, "dlq.Write: the dead-letter publisher of %s did not stop within ShutdownTimeout %v; abandoned (it retries until the publish timeout, %v)",
			w.cfg.Topic, w.cfg.ShutdownTimeout, publishTimeout(w.cfg))
	}
	if err := w.client.Close(); err != nil {
		return fmt.Errorf("dlq.Write: closing the client of %s: %w", w.cfg.Topic, err)
	}
	return nil
}
