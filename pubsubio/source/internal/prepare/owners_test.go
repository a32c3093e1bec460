package prepare

import (
	"flag"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts" // defines --job_name
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// withJobName sets --job_name for the rest of the test: the read labels
// what it creates with it.
func withJobName(t *testing.T, name string) {
	t.Helper()
	prev := flag.Lookup("job_name").Value.String()
	if err := flag.Set("job_name", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("job_name", prev) })
}

// The prepare step refuses a topic subscription pubsubio created for
// another job, naming both jobs and TopicSubscriptions.Shared, before it
// acts; under Shared it reads it and marks it with its own labels, as
// shared; one of a generated name (which the read that created it deletes
// when done) it marks too. Another run of the same job with its Name, one
// made by hand and one already marked as this read's keep their labels;
// a server that cannot update labels fails the prepare step when marking
// matters.
func TestTopicSubscriptionOfAnotherJob(t *testing.T) {
	withJobName(t, "this-job")
	build := func(shared bool) Job {
		return topicJob(t, TopicSubscriptionOptions{Name: "nightly", Shared: shared}, setupTopic)
	}
	sub := build(false).Owned.Subscriptions[0]
	labelled := func(labels map[string]string) func(*pubsubpb.Subscription) {
		return func(s *pubsubpb.Subscription) { s.Topic, s.Labels = setupTopic.String(), labels }
	}
	otherJob := map[string]string{LabelCreatedBy: LabelCreatedByValue, LabelName: "nightly", LabelJob: "other-job", LabelRead: "otherread0", "team": "billing"}

	cfg := build(false)
	adm := newFakeAdmin(existingSub(sub, labelled(otherJob)))
	counts, err := runPrepare(t, adm, cfg)
	wantErrorContaining(t, err, sub.String(), `pubsubio created it for job "other-job"`, `this job is "this-job"`, "TopicSubscriptions.Shared", "nothing was created")
	if counts.rejected != 1 || !cmp.Equal(adm.calls(), []string{"get " + sub.String()}) {
		t.Errorf("%d rejections, calls %q; want 1 and only the describe", counts.rejected, adm.calls())
	}

	for _, tc := range []struct {
		name   string
		shared bool
		labels map[string]string
		want   map[string]string // nil: no update
	}{
		{"shared", true, otherJob, map[string]string{LabelCreatedBy: LabelCreatedByValue, LabelName: "nightly", LabelJob: "this-job", LabelShared: "true", "team": "billing"}},
		{"a generated name of this job", false, map[string]string{LabelCreatedBy: LabelCreatedByValue, LabelJob: "this-job", LabelName: "pubsubio-abcdefghij", LabelRead: "itsread000"},
			map[string]string{LabelCreatedBy: LabelCreatedByValue, LabelJob: "this-job", LabelName: "pubsubio-abcdefghij"}},
		{"another run of this job", false, map[string]string{LabelCreatedBy: LabelCreatedByValue, LabelJob: "this-job", LabelName: "nightly", LabelRead: "earlierrun"}, nil},
		{"made by hand", false, map[string]string{"team": "billing"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := build(tc.shared)
			adm := newFakeAdmin(existingSub(sub, labelled(tc.labels)))
			if _, err := runPrepare(t, adm, cfg); err != nil {
				t.Fatalf("prepare: %v", err)
			}
			got, _ := adm.GetSubscription(t.Context(), sub.String())
			if tc.want == nil {
				if adm.count("update") != 0 || !cmp.Equal(got.GetLabels(), tc.labels) {
					t.Errorf("labels %v after %q, want %v untouched", got.GetLabels(), adm.calls(), tc.labels)
				}
				return
			}
			tc.want[LabelRead] = cfg.Owned.Label
			if diff := cmp.Diff(tc.want, got.GetLabels()); diff != "" {
				t.Errorf("labels after prepare (-want +got):\n%s", diff)
			}
			// Marked once: the next describe finds this read's label.
			if _, err := runPrepare(t, adm, cfg); err != nil || adm.count("update") != 1 {
				t.Errorf("prepare again: %v, %d updates; want 1 in all", err, adm.count("update"))
			}
		})
	}

	cfg = build(true)
	adm = newFakeAdmin(existingSub(sub, labelled(otherJob)))
	adm.errs["update "+sub.String()] = status.Error(codes.PermissionDenied, "denied")
	_, err = runPrepare(t, adm, cfg)
	wantErrorContaining(t, err, "pubsub.subscriptions.update", sub.String(), "nothing was sought")
	adm.errs["update "+sub.String()] = status.Error(codes.InvalidArgument, "labels is not a known Subscription field")
	_, err = runPrepare(t, adm, cfg)
	wantErrorContaining(t, err, "cannot update a subscription's labels", "another TopicSubscriptions.Name")
}
