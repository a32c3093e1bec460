package dlq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
)

// writer is the runtime state of one writeFn instance: one client, one
// publisher for the dead-letter topic, and the dead letters of the current
// bundle that Pub/Sub has not confirmed yet. Every method runs on the
// DoFn's goroutine.
type writer struct {
	cfg    Config
	client *pubsub.Client
	pub    *pubsub.Publisher

	// pending are the publishes of this bundle not yet waited for.
	pending []*pubsub.PublishResult

	// At most one flush goroutine runs at a time (flushAsync); release
	// waits for it, because the client's Flush and Stop must not overlap.
	flushing atomic.Bool
	flushes  sync.WaitGroup

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
	return &writer{cfg: cfg, client: client, pub: pub, now: time.Now, warnf: log.Warnf}, nil
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
	clear(w.pending)
	w.pending = w.pending[:0]
	w.stats.stalled = 0
}

// process publishes f's envelope and, when the bundle has
// MaxInFlightMessages unconfirmed, waits for all of them.
func (w *writer) process(ctx context.Context, f FailedMessage) error {
	env := Encode(f, w.cfg.Topic)
	// The context only carries tracing to the client; the batch's RPC runs
	// under the publisher's own Timeout-bounded context.
	res := w.pub.Publish(context.Background(), &pubsub.Message{Data: env.Data, Attributes: env.Attributes})
	w.pending = append(w.pending, res)
	var err error
	if max := w.cfg.MaxInFlightMessages; max > 0 && len(w.pending) >= max {
		err = w.wait(ctx, fmt.Sprintf("%d dead letters reached MaxInFlightMessages", len(w.pending)))
		w.stats.report(ctx, w)
	} else {
		w.stats.maybeReport(ctx, w)
	}
	return err
}

// finishBundle waits until Pub/Sub confirmed every dead letter of the
// bundle: only then may the bundle commit.
func (w *writer) finishBundle(ctx context.Context) error {
	err := w.wait(ctx, "flushing at the end of the bundle")
	w.stats.report(ctx, w)
	return err
}

// wait flushes the publisher and waits for every pending publish, bounded
// by FlushTimeout. Whatever it returns, nothing is pending afterwards: a
// failure fails the bundle, and its publishes are abandoned to the client
// (not cancelled, so some may still land: a retried bundle can duplicate
// them).
func (w *writer) wait(ctx context.Context, what string) error {
	pending := w.pending
	if len(pending) == 0 {
		return nil // no wait: the last-wait metric keeps the last real one
	}
	w.pending = nil
	w.flushAsync()
	start := w.now()
	defer func() { w.stats.waited(w.now().Sub(start)) }()
	timer := time.NewTimer(w.cfg.FlushTimeout)
	defer timer.Stop()
	for _, r := range pending {
		select {
		case <-r.Ready():
		case <-timer.C:
			confirmed := w.confirmed(pending)
			w.stats.stalled = int64(len(pending) - confirmed)
			return fmt.Errorf("dlq.Write: Pub/Sub confirmed %d of %d dead letters published to %s within FlushTimeout %v (%s); the bundle fails: a runner that retries bundles (Dataflow, Flink) publishes them again, some possibly twice; Prism fails the job. Check that the topic is reachable and its publish quota not exhausted, or raise FlushTimeout",
				confirmed, len(pending), w.cfg.Topic, w.cfg.FlushTimeout, what)
		case <-ctx.Done():
			w.confirmed(pending)
			return fmt.Errorf("dlq.Write: %s with %d dead letters unconfirmed: %w", what, len(pending), ctx.Err())
		}
		if _, err := r.Get(context.Background()); err != nil { // ready: returns at once
			w.confirmed(pending)
			return w.publishError(err)
		}
	}
	w.stats.published += int64(len(pending))
	w.stats.stalled = 0
	return nil
}

// confirmed counts the publishes among pending that Pub/Sub has confirmed
// by now, after a wait ended early, and adds them to the published count.
func (w *writer) confirmed(pending []*pubsub.PublishResult) int {
	n := 0
	for _, r := range pending {
		select {
		case <-r.Ready():
			if _, err := r.Get(context.Background()); err == nil {
				n++
			}
		default:
		}
	}
	w.stats.published += int64(n)
	return n
}

// publishError explains a failed publish of a dead letter.
func (w *writer) publishError(err error) error {
	code, _ := CodeOf(err)
	switch code {
	case codes.NotFound:
		return fmt.Errorf("dlq.Write: the dead-letter topic %s does not exist (NOT_FOUND): %w. dlq.Write never creates its topic, because a dead-letter topic created on the fly has no subscription and what lands there is kept for nobody: create the topic and a subscription to it, or fix Config.Topic", w.cfg.Topic, err)
	case codes.DeadlineExceeded:
		return fmt.Errorf("dlq.Write: Pub/Sub did not confirm dead letters published to %s within the client's publish timeout (twice FlushTimeout %v), retries included: %w. The bundle fails (a runner that retries bundles publishes them again; Prism fails the job); check that the topic is reachable and its publish quota not exhausted, or raise FlushTimeout", w.cfg.Topic, w.cfg.FlushTimeout, err)
	case codes.PermissionDenied:
		return fmt.Errorf("dlq.Write: publishing to the dead-letter topic %s was denied (PERMISSION_DENIED): %w. Grant the identity of Config.Connection (application-default credentials unless CredentialsFile is set) the Pub/Sub Publisher role on the topic", w.cfg.Topic, err)
	}
	return fmt.Errorf("dlq.Write: publishing dead letters to %s failed with %s after the client's retries; the bundle fails (a runner that retries bundles publishes them again; Prism fails the job): %w", w.cfg.Topic, CodeName(code), err)
}

// flushAsync asks the publisher to send what it batches without blocking
// the DoFn: the client's Flush returns only once every batch is handled,
// and the wait must stay under FlushTimeout. While a flush runs, a second
// request is dropped; what was published after it started goes out after
// the client's batch delay (10 ms) instead.
func (w *writer) flushAsync() {
	if !w.flushing.CompareAndSwap(false, true) {
		return
	}
	w.flushes.Add(1)
	go func() {
		defer w.flushes.Done()
		defer w.flushing.Store(false)
		w.pub.Flush()
	}()
}

// close stops the publisher, bounded by ShutdownTimeout, and closes the
// client (Teardown). A stop that overruns is abandoned: logged and counted
// process-wide, because Teardown has no metrics context; a later bundle in
// the process reports it.
func (w *writer) close(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		w.flushes.Wait()
		w.pub.Stop()
		close(done)
	}()
	timer := time.NewTimer(w.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		shutdownsAbandoned.Add(1)
		w.warnf(ctx, "pubsubio: the dead-letter publisher of %s did not stop within ShutdownTimeout %v; abandoning it: its goroutines and what it still retries stay until the client gives up (the publish timeout, %v)",
			w.cfg.Topic, w.cfg.ShutdownTimeout, publishTimeout(w.cfg))
	}
	if err := w.client.Close(); err != nil {
		return fmt.Errorf("dlq.Write: closing the client of %s: %w", w.cfg.Topic, err)
	}
	return nil
}
