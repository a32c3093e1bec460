package sink

import (
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
)

// PublisherOptions map 1:1 onto the client's PublishSettings and its
// Publish retry backoff. Zero fields take the client's defaults, so the
// sink batches like the Publisher users already know.
//
// The client's flow control is not exposed: the writer's own in-flight caps
// bound what is in flight, and the client's blocks inside Publish, where no
// progress budget applies. Hedging is not exposed either: the client
// refuses it with ordering, and a hedged duplicate defeats the sink's
// per-message verdicts.
type PublisherOptions struct {
	// DelayThreshold sends a non-empty batch after this delay. If zero, a
	// batch leaves when it reaches CountThreshold or ByteThreshold, when the
	// writer waits at an in-flight cap, or when the bundle ends: the bundle
	// waits for every publish at its end anyway, so holding a batch until
	// then costs no throughput, and a topic that sees a trickle gets full
	// batches instead of one or two messages per RPC (Beam Java's Pub/Sub
	// writer batches so too). A message then waits at most the rest of its
	// bundle; set a delay to bound that in long bundles. docs/writing.md,
	// Batching.
	DelayThreshold time.Duration
	// CountThreshold sends a batch at this many messages, at most 1,000
	// (Pub/Sub's per-request limit). If zero, DefaultCountThreshold (100)
	// is used.
	CountThreshold int
	// ByteThreshold sends a batch at this many bytes, at most 1e7 (Pub/Sub's
	// per-request limit). If zero, DefaultByteThreshold (1e6) is used.
	ByteThreshold int
	// NumGoroutines is the client's publish concurrency. If zero, the
	// client's (25 x GOMAXPROCS) is used.
	NumGoroutines int
	// Timeout bounds one batch's publish, retries included, ordered
	// publishes too. If zero, DefaultPublishTimeout (60 s) is used.
	Timeout time.Duration
	// EnableCompression gzips requests larger than CompressionBytesThreshold
	// bytes (if zero, DefaultCompressionBytesThreshold, 240). Off by
	// default, as in the client.
	EnableCompression         bool
	CompressionBytesThreshold int
	// RetryInitialBackoff, RetryMaxBackoff and RetryMultiplier shape the
	// client's retry of a failed Publish RPC on transient codes. If zero,
	// the client's 100 ms, 60 s and 4 are used. Timeout bounds the whole
	// retry.
	RetryInitialBackoff time.Duration
	RetryMaxBackoff     time.Duration
	RetryMultiplier     float64
	// EnableMessageOrdering publishes messages that share an ordering key
	// in order; a message may carry an OrderingKey only with it. Order
	// holds per key per writer: key the input by ordering key upstream, so
	// that one key's messages reach one writer.
	EnableMessageOrdering bool
}

// Defaults of the publisher options: the client's own, but for
// DelayThreshold. DefaultPublishSettings is a variable, so these are
// spelled out; a test pins them to it, so a client upgrade that changes a
// default is noticed.
const (
	DefaultCountThreshold            = 100
	DefaultByteThreshold             = 1e6
	DefaultPublishTimeout            = 60 * time.Second
	DefaultCompressionBytesThreshold = 240
	// The Publish retry backoff of the client's default call options.
	DefaultRetryInitialBackoff = 100 * time.Millisecond
	DefaultRetryMaxBackoff     = 60 * time.Second
	DefaultRetryMultiplier     = 4.0
)

// untilFlushed is the client's DelayThreshold when the option is zero:
// longer than any bundle, so that a batch leaves when full or when the
// writer flushes (at an in-flight cap, at the end of the bundle).
const untilFlushed = 24 * time.Hour

// publishRetryCodes are the codes the client retries a Publish on by
// default. Only the backoff is an option: which codes are transient is the
// client's knowledge, not a tuning knob.
var publishRetryCodes = []codes.Code{
	codes.Aborted,
	codes.Canceled,
	codes.Internal,
	codes.ResourceExhausted,
	codes.Unknown,
	codes.Unavailable,
	codes.DeadlineExceeded,
}

// withDefaults returns p with every zero field set to its default.
func (p PublisherOptions) withDefaults() PublisherOptions {
	construct.Default(&p.CountThreshold, DefaultCountThreshold)
	construct.Default(&p.ByteThreshold, DefaultByteThreshold)
	construct.Default(&p.Timeout, DefaultPublishTimeout)
	construct.Default(&p.CompressionBytesThreshold, DefaultCompressionBytesThreshold)
	construct.Default(&p.RetryInitialBackoff, DefaultRetryInitialBackoff)
	construct.Default(&p.RetryMaxBackoff, DefaultRetryMaxBackoff)
	construct.Default(&p.RetryMultiplier, DefaultRetryMultiplier)
	return p
}

// maxRetryMultiplier bounds Publisher.RetryMultiplier: a larger factor
// reaches RetryMaxBackoff after the first retry anyway.
const maxRetryMultiplier = 100

func (p PublisherOptions) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// The client clamps a larger CountThreshold to MaxPublishRequestCount
	// without a word, and never reaches a ByteThreshold above the request
	// limit: both would be settings that do nothing.
	if p.CountThreshold < 1 || p.CountThreshold > pubsub.MaxPublishRequestCount {
		bad("Publisher.CountThreshold %d must be between 1 and %d, Pub/Sub's messages per request", p.CountThreshold, pubsub.MaxPublishRequestCount)
	}
	if p.ByteThreshold < 1 || p.ByteThreshold > pubsub.MaxPublishRequestBytes {
		bad("Publisher.ByteThreshold %d must be between 1 and %d, Pub/Sub's bytes per request", p.ByteThreshold, int(pubsub.MaxPublishRequestBytes))
	}
	if p.CompressionBytesThreshold < 0 || p.CompressionBytesThreshold > pubsub.MaxPublishRequestBytes {
		bad("Publisher.CompressionBytesThreshold %d must be between 0 and %d, Pub/Sub's bytes per request", p.CompressionBytesThreshold, int(pubsub.MaxPublishRequestBytes))
	} else if !p.EnableCompression && p.CompressionBytesThreshold != DefaultCompressionBytesThreshold {
		// The client reads the threshold only when compression is on.
		bad("Publisher.CompressionBytesThreshold %d does nothing unless Publisher.EnableCompression is set; set it, or drop the threshold", p.CompressionBytesThreshold)
	}
	// Written so that NaN, which fails every comparison, is refused too.
	if !(p.RetryMultiplier >= 1 && p.RetryMultiplier <= maxRetryMultiplier) {
		bad("Publisher.RetryMultiplier %v must be between 1 and %v", p.RetryMultiplier, maxRetryMultiplier)
	}
	// Unlike the Java client, which retries ordered publishes forever, the
	// Go client applies the same retryer and Timeout to ordered and
	// unordered batches, so nothing here conflicts with
	// EnableMessageOrdering.
	return errs
}

// publishSettings maps the options onto the client's settings. Everything
// not exposed keeps the client's default.
func (p PublisherOptions) publishSettings() pubsub.PublishSettings {
	s := pubsub.DefaultPublishSettings
	s.DelayThreshold = p.DelayThreshold
	if s.DelayThreshold == 0 {
		s.DelayThreshold = untilFlushed
	}
	s.CountThreshold = p.CountThreshold
	s.ByteThreshold = p.ByteThreshold
	s.NumGoroutines = p.NumGoroutines
	s.Timeout = p.Timeout
	s.EnableCompression = p.EnableCompression
	s.CompressionBytesThreshold = p.CompressionBytesThreshold
	return s
}

// publishCallOptions are the client-wide Publish call options carrying the
// retry backoff. The publisher resolves them for every batch and wraps the
// retryer in its own; the per-attempt timeout of the defaults is moot
// because the batch's context already carries Timeout.
func (p PublisherOptions) publishCallOptions() []gax.CallOption {
	bo := gax.Backoff{Initial: p.RetryInitialBackoff, Max: p.RetryMaxBackoff, Multiplier: p.RetryMultiplier}
	return []gax.CallOption{
		gax.WithTimeout(p.Timeout),
		gax.WithRetry(func() gax.Retryer { return gax.OnCodes(publishRetryCodes, bo) }),
	}
}
