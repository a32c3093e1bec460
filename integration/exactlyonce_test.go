package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/flink"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Exactly-once delivery against the emulator, which implements it: it
// states the setting on every streaming-pull response, confirms acks, and
// refuses an ack ID that expired or was superseded with INVALID_ARGUMENT
// and the ack ID in the error's ErrorInfo metadata. The unit tests of
// pubsubio/source answer with these shapes from pstest reactors, for what
// the emulator cannot be made to do (a failed precondition, a transient
// refusal, a refused receipt).

func init() {
	register.Function1x1(shoutWithInputID)
}

// shoutWithInputID is the transform of the exactly-once pipeline: the
// payload upper-cased, and the input's message ID in attribute "from".
func shoutWithInputID(m pubsubio.Message) pubsubio.Message {
	return pubsubio.Message{Data: []byte(strings.ToUpper(string(m.Data))), Attributes: map[string]string{"from": m.ID}}
}

// exactlyOnceSubscription creates a subscription to topic with exactly-once
// delivery and the given ack deadline, deleted when the test ends.
func exactlyOnceSubscription(t *testing.T, e *emulator.Emulator, topic pubsubio.Topic, ackDeadline time.Duration) pubsubio.Subscription {
	t.Helper()
	sub := pubsubio.SubscriptionOf(e.Project, fmt.Sprintf("eod-%d", time.Now().UnixNano()))
	c := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: sub.String(), Topic: topic.String(), AckDeadlineSeconds: int32(ackDeadline / time.Second),
		EnableExactlyOnceDelivery: true, MessageRetentionDuration: durationpb.New(time.Hour),
	}); err != nil {
		t.Fatalf("create subscription %s: %v", sub, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: sub.String()})
	})
	return sub
}

// What the emulator answers on an exactly-once subscription, the shapes
// the read handles: an ack of a valid ack ID succeeds; one request acking
// a superseded ack ID (its message was nacked) and a valid one is refused
// with INVALID_ARGUMENT naming only the superseded one; and an ack ID whose
// lease lapsed (the message was delivered again) is refused the same way.
func TestEmulatorAnswersExactlyOnceAcks(t *testing.T) {
	t.Parallel()
	e := emulator.Require(t)
	topic := e.CreateTopic(t, "eod-answers")
	sub := exactlyOnceSubscription(t, e, topic, 10*time.Second)
	e.Publish(t, topic, 4, 16, nil)
	c := e.Client(t)
	ctx := context.Background()
	pull := func(n int) []*pubsubpb.ReceivedMessage {
		t.Helper()
		var got []*pubsubpb.ReceivedMessage
		deadline := time.Now().Add(time.Minute)
		for len(got) < n && time.Now().Before(deadline) {
			resp, err := c.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub.String(), MaxMessages: int32(n - len(got))})
			if err != nil {
				t.Fatalf("pull: %v", err)
			}
			got = append(got, resp.GetReceivedMessages()...)
		}
		if len(got) < n {
			t.Fatalf("pulled %d of %d messages within a minute", len(got), n)
		}
		return got
	}
	acknowledge := func(ids ...string) error {
		return c.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub.String(), AckIds: ids})
	}
	// wantRefused checks err refuses exactly ackID, as Pub/Sub does.
	wantRefused := func(what string, err error, ackID string) {
		t.Helper()
		ae, ok := apierror.FromError(err)
		if !ok || ae.GRPCStatus().Code() != codes.InvalidArgument {
			t.Fatalf("%s: %v, want INVALID_ARGUMENT", what, err)
		}
		md := ae.Metadata()
		if len(md) != 1 || md[ackID] != "PERMANENT_FAILURE_INVALID_ACK_ID" || ae.Reason() != "EXACTLY_ONCE_ACKID_FAILURE" {
			t.Fatalf("%s: reason %q, metadata %v; want EXACTLY_ONCE_ACKID_FAILURE and only %s refused as PERMANENT_FAILURE_INVALID_ACK_ID", what, ae.Reason(), md, ackID)
		}
		t.Logf("%s: %v; ErrorInfo reason %s, metadata %v", what, ae.GRPCStatus().Code(), ae.Reason(), md)
	}

	msgs := pull(4)
	if err := acknowledge(msgs[0].GetAckId()); err != nil {
		t.Fatalf("acking a valid ack ID: %v", err)
	}
	if err := c.SubscriptionAdminClient.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: sub.String(), AckIds: []string{msgs[1].GetAckId()}}); err != nil {
		t.Fatalf("nack: %v", err)
	}
	wantRefused("acking a nacked ack ID with a valid one", acknowledge(msgs[1].GetAckId(), msgs[2].GetAckId()), msgs[1].GetAckId())

	// The fourth message's lease lapses after the 10 s ack deadline; its
	// redelivery (with the second, nacked) shows it did.
	again := pull(2)
	ids := []string{again[0].GetMessage().GetMessageId(), again[1].GetMessage().GetMessageId()}
	slices.Sort(ids)
	want := []string{msgs[1].GetMessage().GetMessageId(), msgs[3].GetMessage().GetMessageId()}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("redelivered %v, want the nacked and the expired message %v", ids, want)
	}
	wantRefused("acking an expired ack ID", acknowledge(msgs[3].GetAckId()), msgs[3].GetAckId())
}

// Read -> transform -> Write over an exactly-once subscription, on Prism:
// every ack is confirmed by Pub/Sub, so none of the messages is delivered
// again, and each input reaches the output once.
func TestExactlyOnceReadTransformWrite(t *testing.T) {
	t.Parallel()
	const n = 300
	e := emulator.Require(t)
	conn := pubsubio.Connection{EmulatorEndpoint: e.Endpoint}
	in, out := e.CreateTopic(t, "eod-in"), e.CreateTopic(t, "eod-out")
	sub := exactlyOnceSubscription(t, e, in, 60*time.Second)
	outSub := e.CreateSubscription(t, out, "eod-out", 0)
	ids := e.Publish(t, in, n, 64, nil)

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{sub},
		MaxMessages:   n,
		Connection:    conn,
	})
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, Connection: conn}, beam.ParDo(s, shoutWithInputID, msgs))
	r := runInBackground(p, 5*time.Minute)
	r.wait(t, 5*time.Minute)
	if r.err != nil {
		t.Fatalf("pipeline failed: %v", r.err)
	}

	confirmed, unconfirmed := counter(r.res, "acks_confirmed"), counter(r.res, "acks_unconfirmed")
	var refused []string
	for _, c := range r.res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == pubsubio.MetricsNamespace && strings.HasPrefix(c.Name(), "acks_failed_") && c.Result() > 0 {
			refused = append(refused, fmt.Sprintf("%s=%d", c.Name(), c.Result()))
		}
	}
	if confirmed != n || unconfirmed != 0 || len(refused) > 0 {
		t.Errorf("acks_confirmed %d, acks_unconfirmed %d, refused %v; want all %d confirmed", confirmed, unconfirmed, refused, n)
	}
	if got := counter(r.res, "messages_received"); got != n {
		t.Errorf("messages_received %d, want %d: something was delivered twice", got, n)
	}
	got, copies := receive(t, e.Client(t), outSub, n, 2*time.Minute)
	from := map[string]int{}
	for payload, m := range got {
		from[m.Attributes["from"]] += copies[payload]
	}
	for _, id := range ids {
		if from[id] != 1 {
			t.Errorf("input %s reached the output %d times, want once", id, from[id])
		}
	}
	t.Logf("%d messages read over exactly-once delivery and written: acks_confirmed %d, acks_unconfirmed %d, refused %v, took %v",
		n, confirmed, unconfirmed, refused, r.took.Round(time.Millisecond))
}

// The same over an exactly-once subscription on Flink with checkpoints
// (the embedded cluster, this process the LOOPBACK worker): the read acks
// what a completed checkpoint covers, and every ack the emulator answers,
// seen from a proxy in front of it, is taken: none refused, each input
// once on the output.
func TestExactlyOnceOnFlink(t *testing.T) {
	if isolated(t) {
		return
	}
	const n = 200
	e := emulator.Require(t)
	f := flink.Start(t, flink.Options{CheckpointInterval: 2 * time.Second})
	reads := crash.StartDeliveryCounter(t, e.Endpoint)
	in, out := e.CreateTopic(t, "eod-flink-in"), e.CreateTopic(t, "eod-flink-out")
	sub := exactlyOnceSubscription(t, e, in, 60*time.Second)
	outSub := e.CreateSubscription(t, out, "eod-flink-out", 0)
	ids := e.Publish(t, in, n, 64, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	job := runOnFlinkInProcess(ctx, t, f, "eod", func(s beam.Scope, conn pubsubio.Connection, commit pubsubio.ReadConfig) {
		commit.Subscriptions = []pubsubio.Subscription{sub}
		commit.Connection = pubsubio.Connection{EmulatorEndpoint: reads.Endpoint}
		pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, Connection: conn}, beam.ParDo(s, shoutWithInputID, pubsubio.Read(s, commit)))
	})
	got, copies := receive(t, e.Client(t), outSub, n, 3*time.Minute)
	if acked := reads.AwaitAcked(n, 2*time.Minute); acked < n {
		t.Fatalf("%d of %d messages acked; job server log:\n%s", acked, n, f.Log("jobserver", 4000))
	}
	answers := reads.AwaitAnswers(n, time.Minute)
	if answers.Refused != 0 || answers.Failed != 0 || answers.Taken < n {
		t.Errorf("the emulator's answers to the acks: %+v; want all %d taken, none refused or failed", answers, n)
	}
	from := map[string]int{}
	for payload, m := range got {
		from[m.Attributes["from"]] += copies[payload]
	}
	for _, id := range ids {
		if from[id] != 1 {
			t.Errorf("input %s reached the output %d times, want once", id, from[id])
		}
	}
	t.Logf("EXACTLY-ONCE ON FLINK %d messages: ack answers %+v, each input once on the output", n, answers)
	if err := f.REST.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
}
