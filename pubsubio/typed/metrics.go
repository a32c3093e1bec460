package typed

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
)

// Counters, each updated with the context of the DoFn call that counts.
var (
	// decodeFailures counts messages that did not decode, under every
	// DecodePolicy.
	decodeFailures = beam.NewCounter(metrics.Namespace, "typed_decode_failures")
	// encodeFailures counts values that did not encode, under every
	// FailurePolicy.
	encodeFailures = beam.NewCounter(metrics.Namespace, "typed_encode_failures")
	// revisionsFetched counts schema revisions fetched from the schema
	// service (once per revision and element type per process, while
	// cached).
	revisionsFetched = beam.NewCounter(metrics.Namespace, "typed_schema_revisions_fetched")
)
