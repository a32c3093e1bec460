package dedup

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/rewindow"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.DoFn4x1[context.Context, model.Message, func(string, model.Message), func(model.Message), error](&keyFn{})
	register.Emitter2[string, model.Message]()
	register.Emitter1[model.Message]()
}

var messageType = reflect.TypeOf(model.Message{})

// Deduplicate returns msgs, a PCollection<model.Message>, without the
// messages whose key was already seen within cfg.Horizon: the first copy
// of each key passes, at its own event time and in its own window. Keys
// are remembered across the input's windows. It panics on an invalid
// configuration; TryDeduplicate returns the error.
func Deduplicate(s beam.Scope, cfg Config, msgs beam.PCollection) beam.PCollection {
	out, err := TryDeduplicate(s, cfg, msgs)
	if err != nil {
		panic(err)
	}
	return out
}

// TryDeduplicate is Deduplicate returning the construction error instead
// of panicking.
func TryDeduplicate(s beam.Scope, cfg Config, msgs beam.PCollection) (beam.PCollection, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return beam.PCollection{}, err
	}
	if err := construct.CheckInput(api, msgs, messageType, "pubsubio.Message", "deduplicate what Read returns, or a PCollection of messages of your own"); err != nil {
		return beam.PCollection{}, err
	}
	requirePrismSplitsOff()
	s = s.Scope(api)
	// Keys are remembered in the global window, so that a copy landing in
	// another window than the first is still caught; the output is windowed
	// like the input again.
	global, ws := rewindow.Global(s, msgs)
	keyed, unkeyed := beam.ParDo2(s, &keyFn{IDAttribute: cfg.IDAttribute, Missing: cfg.Missing}, global)
	first, err := beam.TryParDo(s, newDedupFn(cfg), keyed)
	if err != nil {
		return beam.PCollection{}, fmt.Errorf("%s: %w", api, err)
	}
	return rewindow.Restore(s, beam.Flatten(s, first[0], unkeyed), ws), nil
}

var (
	duplicatesCounter = beam.NewCounter(metrics.Namespace, "dedup_duplicates")
	missingCounter    = beam.NewCounter(metrics.Namespace, "dedup_missing_key")
)

// keyFn keys each message for dedupFn, or emits it on its second output
// when it has no key (MissingPass).
type keyFn struct {
	IDAttribute string
	Missing     MissingPolicy
}

func (fn *keyFn) ProcessElement(ctx context.Context, m model.Message, keyed func(string, model.Message), unkeyed func(model.Message)) error {
	if k := key(fn.IDAttribute, m); k != "" {
		keyed(k, m)
		return nil
	}
	if fn.Missing == MissingFail {
		if fn.IDAttribute != "" {
			return fmt.Errorf("%s: message %q from %s has no attribute %q to deduplicate on, and Missing is %s: fix the publisher, or set Missing %s", api, m.ID, m.Subscription, fn.IDAttribute, MissingFail, MissingPass)
		}
		return fmt.Errorf("%s: a message has no ID to deduplicate on (it did not come from a read), and Missing is %s: set IDAttribute, or Missing %s", api, MissingFail, MissingPass)
	}
	missingCounter.Inc(ctx, 1)
	unkeyed(m)
	return nil
}

// key is what identifies m: the value of attribute, or with no attribute
// its ID within its subscription; "" when m has none.
func key(attribute string, m model.Message) string {
	switch {
	case attribute != "":
		return m.Attributes[attribute]
	case m.ID == "" || m.Subscription.IsZero():
		return m.ID
	}
	return m.Subscription.String() + "/" + m.ID
}
