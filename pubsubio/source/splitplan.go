package source

import "github.com/pubsubio/beam-pubsubio/pubsubio/model"

// Split is one streaming-pull reader of one subscription: the element the
// read SDF processes. It carries no position; Pub/Sub has none.
type Split struct {
	Index        int
	Subscription model.Subscription
}

// planSplits is the split universe, a pure function of the configuration so
// that every restart computes the same splits:
//
//	count = PER_KEY ? |subs| : max(|subs|, splits)
//	split i reads subs[i mod |subs|]
//
// Every subscription is read, and under PER_KEY by exactly one split.
func planSplits(subs []model.Subscription, ordering OrderingMode, splits int) []Split {
	count := len(subs)
	if ordering != OrderingPerKey && splits > count {
		count = splits
	}
	plan := make([]Split, count)
	for i := range plan {
		plan[i] = Split{Index: i, Subscription: subs[i%len(subs)]}
	}
	return plan
}

// splitShare is how many messages split index of a plan of count splits
// over subs subscriptions emits when each subscription is read for at most
// maxMessages: the subscription's splits share them evenly (0: no count
// bound, reported as -1).
func splitShare(maxMessages int64, index, count, subs int) int64 {
	if maxMessages == 0 {
		return -1
	}
	siblings := siblingsOf(index, count, subs)
	rank := int64(index / subs)
	share := maxMessages / siblings
	if rank < maxMessages%siblings {
		share++
	}
	return share
}

// siblingsOf is how many splits of a plan of count splits over subs
// subscriptions read the subscription split index reads, itself included.
func siblingsOf(index, count, subs int) int64 {
	// Splits of subscription index%subs are index%subs, +subs, +2*subs...
	n := int64(count / subs)
	if index%subs < count%subs {
		n++
	}
	return n
}
