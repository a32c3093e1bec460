package source

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestPlanSplits(t *testing.T) {
	for _, nSubs := range []int{1, 2, 3, 5} {
		for _, splits := range []int{0, 1, 2, 3, 4, 7, 10} {
			for _, ordering := range []OrderingMode{OrderingNone, OrderingPerKey} {
				t.Run(fmt.Sprintf("subs=%d/splits=%d/%s", nSubs, splits, ordering), func(t *testing.T) {
					subs := testSubs(nSubs)
					plan := planSplits(subs, ordering, splits)

					want := max(nSubs, splits)
					if ordering == OrderingPerKey {
						want = nSubs
					}
					if len(plan) != want {
						t.Fatalf("planSplits: %d splits, want %d", len(plan), want)
					}
					perSub := map[model.Subscription]int{}
					for i, s := range plan {
						if s.Index != i {
							t.Errorf("split %d has Index %d", i, s.Index)
						}
						if s.Subscription != subs[i%nSubs] {
							t.Errorf("split %d reads %v, want subs[%d %% %d] = %v", i, s.Subscription, i, nSubs, subs[i%nSubs])
						}
						perSub[s.Subscription]++
					}
					for _, sub := range subs {
						if perSub[sub] == 0 {
							t.Errorf("subscription %v is read by no split", sub)
						}
						if ordering == OrderingPerKey && perSub[sub] != 1 {
							t.Errorf("PER_KEY: subscription %v is read by %d splits, want exactly 1", sub, perSub[sub])
						}
					}
					again := planSplits(testSubs(nSubs), ordering, splits)
					if diff := cmp.Diff(plan, again); diff != "" {
						t.Errorf("planSplits is not deterministic (-first +second):\n%s", diff)
					}
				})
			}
		}
	}
}

func TestSplitShare(t *testing.T) {
	for _, nSubs := range []int{1, 2, 3} {
		for _, splits := range []int{1, 2, 3, 4, 5, 7, 10} {
			count := max(nSubs, splits)
			for _, maxMessages := range []int64{1, 2, 3, 7, 10, 100, 1001} {
				name := fmt.Sprintf("subs=%d/count=%d/max=%d", nSubs, count, maxMessages)
				perSub := make([][]int64, nSubs)
				for i := range count {
					share := splitShare(maxMessages, i, count, nSubs)
					if share < 0 {
						t.Fatalf("%s: split %d has share %d", name, i, share)
					}
					perSub[i%nSubs] = append(perSub[i%nSubs], share)
				}
				for sub, shares := range perSub {
					var sum int64
					lo, hi := shares[0], shares[0]
					for _, s := range shares {
						sum += s
						lo, hi = min(lo, s), max(hi, s)
					}
					if sum != maxMessages {
						t.Errorf("%s: shares of subscription %d are %v, summing to %d, want %d", name, sub, shares, sum, maxMessages)
					}
					if hi-lo > 1 {
						t.Errorf("%s: shares of subscription %d are %v, differing by %d, want at most 1", name, sub, shares, hi-lo)
					}
				}
			}
		}
	}
}

func TestSplitShareUnbounded(t *testing.T) {
	for i := range 4 {
		if got := splitShare(0, i, 4, 2); got != -1 {
			t.Errorf("splitShare(0, %d, 4, 2) = %d, want -1 (no count bound)", i, got)
		}
	}
}
