package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// (c) The emulator killed and restarted mid-read. The Java emulator keeps
// everything in memory (it has no persistence flag: --help lists host,
// port, iam_host, iam_port and projects), so the restarted one has neither
// the topic, the subscription nor the backlog. What is true then: the read
// fails the job with an error naming the subscription and saying it does
// not exist (it does not end as if idle, which would hide the outage), and
// once the resources are re-created and published to, a rerun reads
// everything.
func TestFaultEmulatorRestartedMidRead(t *testing.T) {
	t.Parallel()
	// step bounds one step: starting or restarting the emulator, or one
	// admin call. One deadline for them all ran out while the job ran.
	step := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	own, err := emulator.Start(step())
	if err != nil {
		if errors.Is(err, emulator.ErrUnavailable) {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := own.Stop(); err != nil {
			t.Errorf("stopping the test's own emulator: %v", err)
		}
	})
	const n, outstanding = 1000, 50
	topic := own.CreateTopic(t, "fault-restart")
	sub := own.CreateSubscription(t, topic, "fault-restart", 10*time.Second)
	own.Publish(t, topic, n, 256, nil)
	cfg := pubsubio.ReadConfig{
		Subscriptions:          []pubsubio.Subscription{sub},
		MaxOutstandingMessages: outstanding,
		MaxRecordsPerBundle:    outstanding / 2,
		IdleTimeout:            20 * time.Second,
		Connection:             pubsubio.Connection{EmulatorEndpoint: own.Endpoint},
	}

	p, first := readInto(t, cfg, nil)
	run := runInBackground(p, 2*time.Minute)
	awaitProgress(t, run, first, 300, time.Minute)
	start := time.Now()
	if err := own.Restart(step()); err != nil {
		t.Fatalf("restarting the emulator: %v", err)
	}
	restarted := time.Since(start)
	client := own.Client(t)
	if _, err := client.TopicAdminClient.GetTopic(step(), &pubsubpb.GetTopicRequest{Topic: topic.String()}); status.Code(err) != codes.NotFound {
		t.Errorf("the restarted emulator answers GetTopic(%s) with %v; want NotFound (nothing persists)", topic, err)
	}
	run.wait(t, 2*time.Minute)
	t.Logf("restart took %v; the job emitted %d of %d and ended %v after the restart began",
		restarted.Round(time.Millisecond), collect.Len(first), n, (run.took - start.Sub(run.start)).Round(time.Millisecond))
	if run.err == nil {
		t.Fatalf("the read succeeded although its subscription vanished with the emulator; it emitted %d of %d", collect.Len(first), n)
	}
	wantInError(t, run.err, sub.String(), "does not exist")
	t.Logf("failed job's error: %s", excerpt(run.err, "pubsubio.Read: "))

	if _, err := client.TopicAdminClient.CreateTopic(step(), &pubsubpb.Topic{Name: topic.String()}); err != nil {
		t.Fatalf("re-creating %s: %v", topic, err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(step(), &pubsubpb.Subscription{Name: sub.String(), Topic: topic.String(), AckDeadlineSeconds: 10}); err != nil {
		t.Fatalf("re-creating %s: %v", sub, err)
	}
	ids := own.Publish(t, topic, n, 256, nil)
	p, second := readInto(t, cfg, nil)
	rerun := runInBackground(p, 2*time.Minute)
	rerun.wait(t, 2*time.Minute)
	if rerun.err != nil {
		t.Fatalf("the rerun on the re-created subscription failed: %v", rerun.err)
	}
	_, dups := readCheck(t, "rerun after the restart", sub, ids, tally(t, second))
	t.Logf("rerun: %d messages in %v, %d duplicates", n, rerun.took.Round(time.Millisecond), dups)
}
