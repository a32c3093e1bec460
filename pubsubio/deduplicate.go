package pubsubio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dedup"
)

// Deduplication's values, re-exported from package dedup.
type (
	// DedupConfig configures Deduplicate: the key (Message.ID or an
	// attribute), the horizon, its clock, and what a message without a key
	// does.
	DedupConfig = dedup.Config
	// DedupTimeDomain is DedupProcessingTime or DedupEventTime.
	DedupTimeDomain = dedup.TimeDomain
	// DedupMissingPolicy is DedupMissingPass or DedupMissingFail.
	DedupMissingPolicy = dedup.MissingPolicy
)

// Time domains (DedupConfig.TimeDomain): the clock the horizon runs on.
const (
	// DedupProcessingTime (default) remembers a key for the horizon of
	// wall-clock time after its first message.
	DedupProcessingTime = dedup.ProcessingTime
	// DedupEventTime remembers a key until the watermark passes its first
	// message's event time plus the horizon; a bounded job ends with its
	// input.
	DedupEventTime = dedup.EventTime
)

// Policies for a message without a key (DedupConfig.Missing).
const (
	// DedupMissingPass (default) lets it through and counts it.
	DedupMissingPass = dedup.MissingPass
	// DedupMissingFail fails the bundle naming the message.
	DedupMissingFail = dedup.MissingFail
)

// Deduplicate returns msgs, a PCollection<Message>, without the messages
// whose key (Message.ID within its subscription, or cfg.IDAttribute) was
// already seen within cfg.Horizon, on any runner: the state is the
// runner's, one entry and one timer per key. The first copy passes, at its
// own event time and in its own window. An invalid configuration panics
// at graph construction; TryDeduplicate returns it as an error.
func Deduplicate(s beam.Scope, cfg DedupConfig, msgs beam.PCollection) beam.PCollection {
	return dedup.Deduplicate(s, cfg, msgs)
}

// TryDeduplicate is Deduplicate returning the construction error instead
// of panicking.
func TryDeduplicate(s beam.Scope, cfg DedupConfig, msgs beam.PCollection) (beam.PCollection, error) {
	return dedup.TryDeduplicate(s, cfg, msgs)
}
