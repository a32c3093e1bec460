package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Reading topics end to end on Prism against the emulator: the prepare
// step creates the read's own subscription; a read of a generated name
// deletes it once done (a cancelled one leaves it, for its TTL or
// cmd/pubsubio-orphans), a read given a Name never does.

// A bounded read of a topic with a generated name reads what is published
// once its subscription exists, then deletes it.
func TestReadTopicBoundedDeletesItsSubscription(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	client := e.Client(t)
	topic := e.CreateTopic(t, "topic-bounded")
	const n = 100
	p, bucket := readInto(t, pubsubio.ReadConfig{
		Topics:      []pubsubio.Topic{topic},
		MaxMessages: n,
		Connection:  pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, nil)
	r := runInBackground(p, 3*time.Minute)
	sub := awaitTopicSubscription(t, client, topic, r)
	ids := e.Publish(t, topic, n, 64, nil)
	r.wait(t, 3*time.Minute)
	if r.err != nil {
		t.Fatalf("pipeline failed: %v", r.err)
	}
	wantAll(t, "the topic's subscription", bucket, sub, ids)
	_, err := client.SubscriptionAdminClient.GetSubscription(context.Background(), &pubsubpb.GetSubscriptionRequest{Subscription: sub.String()})
	if status.Code(err) != codes.NotFound {
		t.Errorf("%s after the bounded read: %v, want NOT_FOUND (deleted)", sub, err)
	}
	if got := counter(r.res, "subscriptions_deleted"); got != 1 {
		t.Errorf("subscriptions_deleted %d, want 1", got)
	}
}

// A periodic job: two bounded runs of a read given a Name, with messages
// published between them. The first run's subscription outlives it, so
// the second reads everything published in between: none lost. A second
// topic, whose subscription under the name was made by hand, is read and
// left too. On pstest: the emulator can hand messages published right
// after a run ended to that run's closed stream and give them back minutes
// later (tried: the second run received nothing in 3 minutes; docs/limits.md,
// Known limits).
func TestReadTopicNamedKeepsItsSubscriptionAcrossRuns(t *testing.T) {
	if isolated(t) {
		return
	}
	e, _ := emulator.Fake(t)
	client := e.Client(t)
	topic, taken := e.CreateTopic(t, "topic-named"), e.CreateTopic(t, "topic-taken")
	name := fmt.Sprintf("nightly-%d", os.Getpid())
	existing := createSubscriptionNamed(t, e, client, pubsubio.SubscriptionOf(e.Project, name+"-"+taken.ID), taken, nil)
	sub := pubsubio.SubscriptionOf(e.Project, name+"-"+topic.ID)
	t.Cleanup(func() {
		_ = client.SubscriptionAdminClient.DeleteSubscription(context.Background(), &pubsubpb.DeleteSubscriptionRequest{Subscription: sub.String()})
	})
	const n = 50
	run := func(cfg pubsubio.ReadConfig, publish func(*pipelineRun) (ids, takenIDs []string)) {
		t.Helper()
		cfg.Topics = []pubsubio.Topic{topic, taken}
		cfg.TopicSubscriptions = pubsubio.TopicSubscriptionOptions{Name: name}
		cfg.Connection = pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
		p, bucket := readInto(t, cfg, nil)
		r := runInBackground(p, 3*time.Minute)
		ids, takenIDs := publish(r)
		r.wait(t, 3*time.Minute)
		if r.err != nil {
			t.Fatalf("pipeline failed: %v", r.err)
		}
		wantAll(t, "the topic's subscription", bucket, sub, ids)
		wantAll(t, "the subscription made by hand", bucket, existing, takenIDs)
		if got := counter(r.res, "subscriptions_deleted"); got != 0 {
			t.Errorf("subscriptions_deleted %d, want 0", got)
		}
		for _, s := range []pubsubio.Subscription{sub, existing} {
			describe(t, client, s) // fails the test if it is gone
		}
	}

	// The first run creates the subscription; it reads what is published
	// once it exists.
	run(pubsubio.ReadConfig{MaxMessages: n}, func(r *pipelineRun) ([]string, []string) {
		if got := awaitTopicSubscription(t, client, topic, r); got != sub {
			t.Errorf("the read created %s, want %s", got, sub)
		}
		return e.Publish(t, topic, n, 64, nil), e.Publish(t, taken, n, 64, nil)
	})
	// Published between the runs: the second reads all of it.
	between, takenBetween := e.Publish(t, topic, n, 64, nil), e.Publish(t, taken, n, 64, nil)
	run(pubsubio.ReadConfig{MaxMessages: n}, func(*pipelineRun) ([]string, []string) { return between, takenBetween })
}

// A read given a Name whose subscription pubsubio created for another job
// (--job_name) fails at prepare, naming that job and Shared, and leaves
// the subscription alone.
func TestReadTopicOfAnotherJobRefused(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	client := e.Client(t)
	topic := e.CreateTopic(t, "topic-other-job")
	name := fmt.Sprintf("other-job-%d", os.Getpid())
	sub := pubsubio.SubscriptionOf(e.Project, name+"-"+topic.ID)
	labels := map[string]string{"created-by": "pubsubio", "pubsubio-name": name, "pubsubio-job": "ingest-2", "pubsubio-read": "abcdefghij"}
	createSubscriptionNamed(t, e, client, sub, topic, labels)
	p, _ := readInto(t, pubsubio.ReadConfig{
		Topics:             []pubsubio.Topic{topic},
		TopicSubscriptions: pubsubio.TopicSubscriptionOptions{Name: name},
		IdleTimeout:        5 * time.Second,
		Connection:         pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, nil)
	err := runFails(t, p)
	wantInError(t, err, sub.String(), `pubsubio created it for job "ingest-2"`, "TopicSubscriptions.Shared")
	if got := describe(t, client, sub).GetLabels(); !cmp.Equal(got, labels) {
		t.Errorf("%s's labels after the refusal: %v, want %v", sub, got, labels)
	}
}

// A read whose own subscription for a topic exists on another topic fails
// at prepare, naming both topics, and leaves that subscription alone.
func TestReadTopicSubscriptionOnAnotherTopicFails(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	client := e.Client(t)
	topic, elsewhere := e.CreateTopic(t, "topic-asked"), e.CreateTopic(t, "topic-elsewhere")
	name := fmt.Sprintf("clash-%d", os.Getpid())
	clash := createSubscriptionNamed(t, e, client, pubsubio.SubscriptionOf(e.Project, name+"-"+topic.ID), elsewhere, nil)
	p, _ := readInto(t, pubsubio.ReadConfig{
		Topics:             []pubsubio.Topic{topic},
		TopicSubscriptions: pubsubio.TopicSubscriptionOptions{Name: name},
		IdleTimeout:        5 * time.Second,
		Connection:         pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, nil)
	err := runFails(t, p)
	wantInError(t, err, clash.String(), fmt.Sprintf("it is on topic %q", elsewhere.String()), "for topic "+topic.String())
	if got := describe(t, client, clash); got.GetTopic() != elsewhere.String() {
		t.Errorf("%s after the failed read is on %s, want it left on %s", clash, got.GetTopic(), elsewhere)
	}
}

// An unbounded read of a topic creates a subscription of its own with a
// generated name, labelled and expiring a day after its last reader went
// away, and leaves it when the job is cancelled (only a drain, which Prism
// cannot do, ends the read and deletes it); cmd/pubsubio-orphans then
// finds it by its labels, its job no longer running, and deletes it.
func TestReadTopicUnboundedLeavesItsSubscription(t *testing.T) {
	if isolated(t) {
		return
	}
	e := emulator.Require(t)
	client := e.Client(t)
	topic := e.CreateTopic(t, "topic-unbounded")
	job := fmt.Sprintf("Orphaned-%d", os.Getpid())
	prev := flag.Lookup("job_name").Value.String()
	if err := flag.Set("job_name", job); err != nil {
		t.Fatal(err)
	}
	p, bucket := readInto(t, pubsubio.ReadConfig{
		Topics:     []pubsubio.Topic{topic},
		Connection: pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	}, nil)
	if err := flag.Set("job_name", prev); err != nil {
		t.Fatal(err)
	}
	r := runInBackground(p, 3*time.Minute)
	sub := awaitTopicSubscription(t, client, topic, r)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: sub.String()})
	})
	ids := e.Publish(t, topic, 3, 64, nil)
	awaitProgress(t, r, bucket, len(ids), time.Minute)
	r.cancel()
	r.wait(t, time.Minute)
	wantAll(t, "the topic's subscription", bucket, sub, ids)

	got := describe(t, client, sub) // it outlived the job
	name := strings.TrimSuffix(sub.ID, "-"+topic.ID)
	if labels := got.GetLabels(); labels["created-by"] != "pubsubio" || labels["pubsubio-name"] != name || !strings.HasPrefix(name, "pubsubio-") {
		t.Errorf("%s has labels %v, want created-by=pubsubio and pubsubio-name=%s (generated: pubsubio-...)", sub, labels, name)
	}
	if ttl := got.GetExpirationPolicy().GetTtl().AsDuration(); ttl != 24*time.Hour {
		t.Errorf("%s expires after %v without a reader, want 24h", sub, ttl)
	}
	if ret := got.GetMessageRetentionDuration().AsDuration(); ret != 24*time.Hour {
		t.Errorf("%s retains messages for %v, want 24h", sub, ret)
	}
	if labels := got.GetLabels(); labels["pubsubio-job"] != strings.ToLower(job) {
		t.Errorf("%s has labels %v, want pubsubio-job=%s", sub, labels, strings.ToLower(job))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "../cmd/pubsubio-orphans", "-project="+e.Project, "-endpoint="+e.Endpoint, "-running=another-job", "-delete")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pubsubio-orphans: %v\n%s", err, out)
	}
	if want := sub.String() + "\tjob=" + strings.ToLower(job) + "\tname=" + name + "\tdeleted"; !strings.Contains(string(out), want) {
		t.Errorf("pubsubio-orphans printed:\n%s\nwant a line %q", out, want)
	}
	if _, err := client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: sub.String()}); status.Code(err) != codes.NotFound {
		t.Errorf("%s after pubsubio-orphans -delete: %v, want NOT_FOUND", sub, err)
	}
}

// awaitTopicSubscription waits until topic has a subscription, which the
// running job r creates, and returns it: the job's messages are only those
// published after that. It fails the test if the job ends first or a
// minute passes.
func awaitTopicSubscription(t *testing.T, client *pubsub.Client, topic pubsubio.Topic, r *pipelineRun) pubsubio.Subscription {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		it := client.TopicAdminClient.ListTopicSubscriptions(ctx, &pubsubpb.ListTopicSubscriptionsRequest{Topic: topic.String()})
		name, err := it.Next()
		cancel()
		if err == nil {
			sub, perr := pubsubio.ParseSubscription(name)
			if perr != nil {
				t.Fatal(perr)
			}
			return sub
		}
		if err != iterator.Done {
			t.Logf("listing the subscriptions of %s: %v", topic, err)
		}
		select {
		case <-r.done:
			t.Fatalf("the job ended (after %v: %v) before %s had a subscription", r.took, r.err, topic)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no subscription a minute after the job started", topic)
		}
	}
}

// createSubscriptionNamed creates sub on topic with labels (none: as
// something other than a read would), and deletes it when the test ends.
func createSubscriptionNamed(t *testing.T, e *emulator.Emulator, client *pubsub.Client, sub pubsubio.Subscription, topic pubsubio.Topic, labels map[string]string) pubsubio.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub.String(), Topic: topic.String(), Labels: labels}); err != nil {
		t.Fatalf("creating %s on %s: %v", sub, topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: sub.String()}); err != nil {
			t.Logf("deleting %s on %s: %v", sub, e.Endpoint, err)
		}
	})
	return sub
}
