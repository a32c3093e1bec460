package prepare

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Two reads of one pipeline must not share a subscription that one of
// them creates for a topic: they would split its messages, and a bounded
// one would delete it under the other once it finished. Construction
// remembers, per pipeline, the subscriptions its reads consume and refuses
// a read that would share one that way. Two reads of one subscription
// listed in Subscriptions stay allowed, as they always were.

// claim is how one read of a pipeline consumes a subscription.
type claim struct {
	scope string // the scope the read was built in, to name it
	owned bool   // created by the read for one of its topics
}

// claims are the subscriptions the reads of each pipeline in this process
// consume. A pipeline's entry goes when the pipeline is garbage collected.
var claims = struct {
	mu      sync.Mutex
	byGraph map[weak.Pointer[graph.Graph]]map[model.Subscription]claim
}{byGraph: map[weak.Pointer[graph.Graph]]map[model.Subscription]claim{}}

// Claim records that a read built in s consumes subs, of which it creates
// owned for its topics, or returns why another read of s's pipeline
// already consumes one of its topic subscriptions, or one of its
// subscriptions as a topic subscription. It records nothing when it
// refuses.
func Claim(s beam.Scope, subs []model.Subscription, owned Owned) error {
	g := pipelineOf(s)
	if g == nil {
		return nil
	}
	key := weak.Make(g)
	claims.mu.Lock()
	defer claims.mu.Unlock()
	held := claims.byGraph[key]
	var errs []error
	for _, sub := range subs {
		topic := slices.Index(owned.Subscriptions, sub) // its index in Topics, or -1
		other, ok := held[sub]
		if !ok || topic < 0 && !other.owned {
			continue
		}
		subject := fmt.Sprintf("Subscriptions: %s", sub)
		if topic >= 0 {
			subject = fmt.Sprintf("Topics[%d]: its subscription %s (TopicSubscriptions.Name %q)", topic, sub, owned.Name)
		}
		how := "read"
		if other.owned {
			how = "created for its topic"
		}
		errs = append(errs, fmt.Errorf("%s is also %s by another read of this pipeline (in %s): the two would split its messages, and a read of a generated name deletes the subscription it created under the other; "+
			"give the topic read another TopicSubscriptions.Name, or read the subscription in one read", subject, how, other.scope))
	}
	if len(errs) > 0 {
		return construct.Invalid("pubsubio.Read", errs...)
	}
	if held == nil {
		held = map[model.Subscription]claim{}
		claims.byGraph[key] = held
		runtime.AddCleanup(g, forgetPipeline, key)
	}
	for _, sub := range subs {
		if _, ok := held[sub]; !ok {
			held[sub] = claim{scope: s.String(), owned: slices.Contains(owned.Subscriptions, sub)}
		}
	}
	return nil
}

// forgetPipeline drops the claims of a collected pipeline.
func forgetPipeline(key weak.Pointer[graph.Graph]) {
	claims.mu.Lock()
	defer claims.mu.Unlock()
	delete(claims.byGraph, key)
}

// pipelineOf returns the graph s adds transforms to. Beam's Scope keeps it
// in an unexported field and offers no accessor; nil (nothing is refused)
// if a Beam version keeps it otherwise. TestSharedTopicSubscriptionRefused
// fails then, so an upgrade of Beam that breaks this does not go unseen.
func pipelineOf(s beam.Scope) *graph.Graph {
	f := reflect.ValueOf(s).FieldByName("real")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*graph.Graph]() || f.IsNil() {
		return nil
	}
	return (*graph.Graph)(f.UnsafePointer())
}
