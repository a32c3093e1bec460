package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source"
)

func TestMain(m *testing.M) { emulator.Main(m) }

// On the emulator, among subscriptions labelled as a read labels those it
// creates for a topic: only the subscription of a generated name whose
// job is not running is an orphan, and only orphans are deleted, with
// -delete (and, with -include-named, those of a user's Name and shared
// ones); the subscription of a running job, of a Name the user gave, read
// under Shared or made without --job_name stays; one pubsubio did not
// create is not listed.
func TestOrphansOnTheEmulator(t *testing.T) {
	e := emulator.Require(t)
	client := e.Client(t)
	topic := e.CreateTopic(t, "orphans")
	// Labelled at creation, as a read does (the emulator cannot update
	// labels).
	n := 0
	labelled := func(prefix string, labels map[string]string) model.Subscription {
		n++
		sub := model.SubscriptionOf(e.Project, fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), n))
		if labels != nil {
			labels[source.LabelCreatedBy] = source.LabelCreatedByValue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub.String(), Topic: topic.String(), Labels: labels}); err != nil {
			t.Fatalf("creating %s: %v", sub, err)
		}
		t.Cleanup(func() {
			_ = client.SubscriptionAdminClient.DeleteSubscription(context.Background(), &pubsubpb.DeleteSubscriptionRequest{Subscription: sub.String()})
		})
		return sub
	}
	subs := map[string]model.Subscription{
		"orphan":  labelled("gone-generated", map[string]string{source.LabelJob: "gone-job", source.LabelName: "pubsubio-abcdefghij"}),
		"running": labelled("live-generated", map[string]string{source.LabelJob: "live-job", source.LabelName: "pubsubio-bcdefghijk"}),
		"named":   labelled("gone-named", map[string]string{source.LabelJob: "gone-job", source.LabelName: "nightly"}),
		"shared":  labelled("gone-shared", map[string]string{source.LabelJob: "gone-job", source.LabelName: "pubsubio-cdefghijkl", source.LabelShared: "true"}),
		"no job":  labelled("nojob", map[string]string{source.LabelName: "pubsubio-defghijklm"}),
		"foreign": labelled("foreign", nil),
	}
	exists := func(sub model.Subscription) bool {
		_, err := client.SubscriptionAdminClient.GetSubscription(context.Background(), &pubsubpb.GetSubscriptionRequest{Subscription: sub.String()})
		if err != nil && status.Code(err) != codes.NotFound {
			t.Fatalf("describing %s: %v", sub, err)
		}
		return err == nil
	}
	cmd := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		// The job name as given to the job: the label holds it lowercased.
		args = append(args, "-project="+e.Project, "-endpoint="+e.Endpoint, "-running=Live-Job, other-job")
		if err := run(args, &out); err != nil {
			t.Fatalf("pubsubio-orphans %v: %v", args, err)
		}
		return out.String()
	}
	line := func(out, key string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, subs[key].String()+"\t") {
				return l
			}
		}
		return ""
	}

	out := cmd()
	for key, want := range map[string]verdict{"orphan": orphan, "running": running, "named": keptNamed, "shared": keptShared, "no job": keptNoJob} {
		if l := line(out, key); !strings.HasSuffix(l, "\t"+string(want)) {
			t.Errorf("%s: line %q, want verdict %q", key, l, want)
		}
	}
	if l := line(out, "foreign"); l != "" {
		t.Errorf("a subscription pubsubio did not create is listed: %q", l)
	}
	if !exists(subs["orphan"]) {
		t.Fatal("the orphan was deleted without -delete")
	}

	out = cmd("-delete")
	if l := line(out, "orphan"); !strings.HasSuffix(l, "\tdeleted") || exists(subs["orphan"]) {
		t.Errorf("with -delete: %q, and the orphan exists: %v; want it deleted", l, exists(subs["orphan"]))
	}
	for _, key := range []string{"running", "named", "shared", "no job", "foreign"} {
		if !exists(subs[key]) {
			t.Errorf("%s was deleted", key)
		}
	}

	cmd("-delete", "-include-named")
	for key, want := range map[string]bool{"running": true, "named": false, "shared": false, "no job": true} {
		if got := exists(subs[key]); got != want {
			t.Errorf("after -include-named, %s exists: %v, want %v", key, got, want)
		}
	}
}

// -delete without -running is refused: every job would count as gone.
func TestDeleteNeedsRunning(t *testing.T) {
	err := run([]string{"-project=p", "-endpoint=127.0.0.1:1", "-delete"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-delete needs -running") {
		t.Errorf("run: %v, want -delete refused without -running", err)
	}
	if err := run([]string{"-running=a"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-project is required") {
		t.Errorf("run without -project: %v", err)
	}
}
