package prepare

import (
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The prepare step warns about a subscription whose dead-letter policy
// leaves the read little room: any policy when the streams may be sent
// more than the budget holds, fewer than safeDeliveryAttempts on a runner
// that does not retry a failed bundle in place; never without a policy,
// and not on Dataflow within the budget.
func TestPrepareWarnsAboutATightDeadLetterPolicy(t *testing.T) {
	sub := testSubs(1)[0]
	policy := func(n int32) func(*pubsubpb.Subscription) {
		return func(s *pubsubpb.Subscription) {
			s.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: "projects/p/topics/dead", MaxDeliveryAttempts: n}
		}
	}
	for _, tc := range []struct {
		name  string
		risks AttemptRisks
		desc  func(*pubsubpb.Subscription)
		want  []string // nil: no warning
	}{
		{"no dead-letter policy", AttemptRisks{OverBudget: true, Restarts: "prism"}, nil, nil},
		{"dataflow within the budget", AttemptRisks{}, policy(5), nil},
		{"prism, 10 attempts", AttemptRisks{Restarts: "prism"}, policy(10), nil},
		{"prism, 5 attempts", AttemptRisks{Restarts: "prism"}, policy(5), []string{"after 5 delivery attempts", `runner "prism"`, "at least 10", "--max-delivery-attempts=10"}},
		{"flink, Pub/Sub's default", AttemptRisks{Restarts: "flink"}, policy(0), []string{"after 5 delivery attempts", `runner "flink"`}},
		{"over the budget, 100 attempts", AttemptRisks{OverBudget: true}, policy(100), []string{"after 100 delivery attempts", "more than the buffer budget holds", "leave MaxOutstandingMessages and MaxOutstandingBytes unset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testJob([]model.Subscription{sub}, func(j *Job) { j.Risks = tc.risks })
			counts, err := runPrepare(t, newFakeAdmin(existingSub(sub, tc.desc)), p)
			if err != nil {
				t.Fatalf("prepare: %v", err)
			}
			w := tc.risks.warning(sub.String(), existingSub(sub, tc.desc))
			if tc.want == nil {
				if w != "" || counts.warned != 0 {
					t.Errorf("warning %q (%d counted), want none", w, counts.warned)
				}
				return
			}
			if counts.warned != 1 {
				t.Errorf("%d warnings counted, want 1", counts.warned)
			}
			for _, want := range append(tc.want, sub.String(), "projects/p/topics/dead") {
				if !strings.Contains(w, want) {
					t.Errorf("warning does not contain %q: %s", want, w)
				}
			}
		})
	}
}
