package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Exactly-once delivery on pstest. pstest keeps the subscription's
// setting and states it on every streaming-pull response, so the client
// acks with results; but it answers every ack with success, so the
// refusals here come from reactors that answer as Pub/Sub does (the
// shapes integration/exactlyonce_test.go reads from the emulator): an
// INVALID_ARGUMENT naming each refused ack ID in its ErrorInfo metadata,
// with a reason, or a status for the whole request.

// ackIDFailure is the reason Pub/Sub gives for an ack ID that expired or
// was superseded; transientAckIDFailure one worth sending again.
const (
	ackIDFailure          = "PERMANENT_FAILURE_INVALID_ACK_ID"
	transientAckIDFailure = "TRANSIENT_FAILURE_UNORDERED_ACK_ID"
)

// refusal is Pub/Sub's answer refusing the ack IDs in reasons (by ID,
// with a reason) under code, or the whole request when reasons is empty.
func refusal(code codes.Code, reasons map[string]string) error {
	st := status.New(code, "Some acknowledgement ids in the request were invalid. This could be because the acknowledgement ids have expired or the acknowledgement ids were malformed.")
	if len(reasons) > 0 {
		var err error
		if st, err = st.WithDetails(&errdetails.ErrorInfo{Reason: "EXACTLY_ONCE_ACKID_FAILURE", Domain: "pubsub.googleapis.com", Metadata: reasons}); err != nil {
			panic(err)
		}
	}
	return st.Err()
}

// answering is a pstest reactor on Acknowledge or ModifyAckDeadline that
// answers each request with answer(its ack IDs): nil lets pstest apply it.
// pstest's ack IDs are the message IDs. It records every request.
type answering struct {
	answer func(call int, ackIDs []string) error

	mu       sync.Mutex
	requests [][]string
}

func (a *answering) React(req any) (bool, any, error) {
	var ids []string
	switch r := req.(type) {
	case *pubsubpb.AcknowledgeRequest:
		ids = r.GetAckIds()
	case *pubsubpb.ModifyAckDeadlineRequest:
		ids = r.GetAckIds()
	}
	a.mu.Lock()
	call := len(a.requests)
	a.requests = append(a.requests, slices.Clone(ids))
	a.mu.Unlock()
	if err := a.answer(call, ids); err != nil {
		return true, &emptypb.Empty{}, err
	}
	return false, nil, nil
}

func (a *answering) calls() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.requests)
}

// exactlyOnceSub creates a subscription to topic with exactly-once
// delivery (or without) and a 10 s ack deadline.
func (f *fakeServer) exactlyOnceSub(t *testing.T, topic, id string, exactlyOnce bool) model.Subscription {
	t.Helper()
	sub := model.SubscriptionOf(testProject, id)
	if _, err := f.client.SubscriptionAdminClient.CreateSubscription(context.Background(), &pubsubpb.Subscription{
		Name: sub.String(), Topic: topic, AckDeadlineSeconds: 10, EnableExactlyOnceDelivery: exactlyOnce,
	}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	return sub
}

// readUntil runs bundles of fn's split 0 from rest until want messages
// were emitted, paced as a runner resumes an idle split, and returns the
// IDs of what they emitted and the last residual.
func readUntil(t *testing.T, fn *readFn, rest Restriction, want int) ([]string, Restriction) {
	t.Helper()
	msgs, rest := readMessagesUntil(t, fn, rest, want)
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids, rest
}

// readMessagesUntil is readUntil returning the messages.
func readMessagesUntil(t *testing.T, fn *readFn, rest Restriction, want int) ([]model.Message, Restriction) {
	t.Helper()
	var msgs []model.Message
	deadline := time.Now().Add(45 * time.Second)
	for len(msgs) < want {
		if time.Now().After(deadline) {
			t.Fatalf("emitted %d of %d messages within 45s", len(msgs), want)
		}
		got, residual := runTestBundle(t, fn, rest)
		if len(got) == 0 {
			time.Sleep(fn.Cfg.PollDelay) // the runner's ResumeProcessingIn(PollDelay)
		}
		msgs = append(msgs, got...)
		rest = residual
	}
	return msgs, rest
}

// exactlyOnceRead is a one-split read of sub on f.
func exactlyOnceRead(t *testing.T, f *fakeServer, sub model.Subscription) *readFn {
	t.Helper()
	fn := &readFn{ReadID: "exactly-once-" + sub.ID, SplitCount: 1, Cfg: crossProcessConfig(t, f.srv.Addr, sub)}
	fn.Setup()
	t.Cleanup(fn.Teardown)
	return fn
}

// On an exactly-once subscription the bundle after the one that emitted a
// message acks it with AckWithResult and waits for the answer: each
// confirmed ack counts in acks_confirmed. On a subscription without it
// the same read counts none.
func TestExactlyOnceAcksAreConfirmed(t *testing.T) {
	const n = 6
	for _, exactlyOnce := range []bool{true, false} {
		t.Run(fmt.Sprint("exactly-once=", exactlyOnce), func(t *testing.T) {
			f := newFakeServer(t)
			topic, _ := f.topicWithSubs(t, "confirmed", 0)
			sub := f.exactlyOnceSub(t, topic, "confirmed", exactlyOnce)
			ids := f.publish(t, topic, n, nil)
			fn := exactlyOnceRead(t, f, sub)
			emitted, rest := readUntil(t, fn, Restriction{}, n)
			runCrossProcessBundle(t, fn, rest) // acks the last bundle's messages
			if !sameIDs(emitted, ids) {
				t.Fatalf("emitted %v, want %v", emitted, ids)
			}
			// Without exactly-once delivery the client sends acks on its
			// own time (every 100 ms).
			awaitCondition(t, "every message acked on the server", func() bool { return f.acked(ids) == n })
			want := int64(0)
			if exactlyOnce {
				want = n
			}
			st := fn.rs.stats
			if c, u := st.get(acksConfirmed), st.get(acksUnconfirmed); c != want || u != 0 {
				t.Errorf("acks_confirmed %d, acks_unconfirmed %d; want %d and 0", c, u, want)
			}
		})
	}
}

// An ack Pub/Sub refuses does not fail the bundle: it is counted under its
// code, the acks sent in the same request as unconfirmed (the client
// answers them with the request's error), and the read goes on.
func TestExactlyOnceRefusedAcksAreCountedNotFailed(t *testing.T) {
	const n = 4
	cases := []struct {
		name        string
		refuse      func(ids []string) error // the answer to the first Acknowledge
		counter     string
		refused     int64
		unconfirmed int64 // sent with refused ones: the client confirms nothing of them
	}{
		{"expired ack IDs", func(ids []string) error {
			return refusal(codes.InvalidArgument, map[string]string{ids[0]: ackIDFailure, ids[1]: ackIDFailure})
		}, "acks_failed_INVALID_ARGUMENT", 2, n - 2},
		{"failed precondition", func([]string) error {
			return status.Error(codes.FailedPrecondition, "the subscription is detached")
		}, "acks_failed_FAILED_PRECONDITION", n, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acks := &answering{answer: func(call int, ids []string) error {
				if call == 0 {
					return c.refuse(ids)
				}
				return nil
			}}
			f := newFakeServer(t, pstest.ServerReactorOption{FuncName: "Acknowledge", Reactor: acks})
			topic, _ := f.topicWithSubs(t, "refused", 0)
			sub := f.exactlyOnceSub(t, topic, "refused", true)
			ids := f.publish(t, topic, n, nil)
			fn := exactlyOnceRead(t, f, sub)
			// One bundle emits all of them: the subscription is read only
			// once they are all published, and pstest delivers one message
			// per 10 ms tick, so wait for the last to be buffered.
			pollUntilBuffered(t, fn, sub, n)
			emitted, rest := readUntil(t, fn, Restriction{}, n)
			runCrossProcessBundle(t, fn, rest)
			if !sameIDs(emitted, ids) {
				t.Fatalf("emitted %v, want %v", emitted, ids)
			}
			if calls := acks.calls(); len(calls) == 0 || len(calls[0]) != n {
				t.Fatalf("Acknowledge requests %v: want the first to carry all %d acks", calls, n)
			}
			st := fn.rs.stats
			if got := st.failedAcks.Load(c.counter); got != c.refused {
				t.Errorf("%s = %d, want %d", c.counter, got, c.refused)
			}
			if conf, unconf := st.get(acksConfirmed), st.get(acksUnconfirmed); conf != 0 || unconf != c.unconfirmed {
				t.Errorf("acks_confirmed %d, acks_unconfirmed %d; want 0 and %d", conf, unconf, c.unconfirmed)
			}
		})
	}
}

// pollUntilBuffered starts fn's split 0 and waits until it buffered n
// messages, so that its next bundle emits them all.
func pollUntilBuffered(t *testing.T, fn *readFn, sub model.Subscription, n int) {
	t.Helper()
	r, _ := readers.reader(splitKey{read: fn.ReadID, index: 0}, Split{Index: 0, Subscription: sub}, fn.Cfg)
	if err := poll(r); err != nil {
		t.Fatal(err)
	}
	awaitCondition(t, fmt.Sprintf("%d messages buffered", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.ledger.buffered >= n
	})
}

// The client hands a message over only once Pub/Sub accepted its receipt
// modack: a delivery whose receipt was refused never reaches the read.
// The refusal is of the first delivery; the client reads one stream's
// responses in order, so once the second message was emitted, the first
// had been dropped. (It comes back once its lease lapses: on pstest, the
// stream's 60 s ack deadline.)
func TestExactlyOnceReceiptRefused(t *testing.T) {
	var refusedID string
	var once sync.Once
	receipts := &answering{answer: func(_ int, ids []string) error {
		var err error
		once.Do(func() {
			refusedID = messageOfAckID(ids[0])
			err = refusal(codes.InvalidArgument, map[string]string{ids[0]: ackIDFailure})
		})
		return err
	}}
	f := newFakeServer(t, pstest.ServerReactorOption{FuncName: "ModifyAckDeadline", Reactor: receipts})
	topic, _ := f.topicWithSubs(t, "receipt", 0)
	sub := f.exactlyOnceSub(t, topic, "receipt", true)
	ids := f.publish(t, topic, 2, nil)
	fn := exactlyOnceRead(t, f, sub)
	emitted, _ := readUntil(t, fn, Restriction{}, 1)
	if len(emitted) != 1 || emitted[0] == refusedID || !slices.Contains(ids, emitted[0]) {
		t.Fatalf("emitted %v; want the one of %v whose receipt was not refused (%s)", emitted, ids, refusedID)
	}
	if m := f.srv.Message(refusedID); m == nil || m.Deliveries != 1 {
		t.Fatalf("message %s whose receipt was refused: %+v, want 1 delivery", refusedID, m)
	}
	if got := fn.rs.stats.get(messagesReceived); got != 1 {
		t.Errorf("messages_received = %d, want 1: the delivery whose receipt was refused reached the read", got)
	}
}

// messageOfAckID is the message a pstest ack ID ("ID:delivery") is for.
func messageOfAckID(ackID string) string {
	id, _, _ := strings.Cut(ackID, ":")
	return id
}

// Acks of a residual that moved go with the Acknowledge RPC. On an
// exactly-once subscription its answer names the ack IDs Pub/Sub refused:
// those are counted under INVALID_ARGUMENT, one refused for a transient
// reason is sent again (and confirmed by its own answer), and those sent
// with them are taken but, as the client counts them, not confirmed;
// nothing fails.
func TestExactlyOnceRemoteAcksAnswered(t *testing.T) {
	const n = 6
	var refused, transient string
	acks := &answering{answer: func(call int, ids []string) error {
		if call == 0 {
			refused, transient = ids[0], ids[1]
			return refusal(codes.InvalidArgument, map[string]string{refused: ackIDFailure, transient: transientAckIDFailure})
		}
		return nil
	}}
	f := newFakeServer(t, pstest.ServerReactorOption{FuncName: "Acknowledge", Reactor: acks})
	topic, _ := f.topicWithSubs(t, "remote", 0)
	sub := f.exactlyOnceSub(t, topic, "remote", true)
	ids := f.publish(t, topic, n, nil)
	ackIDs := pullAckIDs(t, f, sub, n)

	fn := exactlyOnceRead(t, f, sub)
	rest := Restriction{Owner: "another-process", AckIDs: ackIDs, Seq: 7}
	runCrossProcessBundle(t, fn, rest)
	calls := acks.calls()
	if len(calls) != 2 || len(calls[0]) != n || !slices.Equal(calls[1], []string{transient}) {
		t.Fatalf("Acknowledge requests %v: want all %d, then the transient one again", calls, n)
	}
	st := fn.rs.stats
	for name, want := range map[string]int64{"acks_confirmed": 1, "acks_unconfirmed": n - 2, "acks_via_rpc": n - 1, "ack_rpc_failures": 0} {
		if got := counterByName(st, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if got := st.failedAcks.Load("acks_failed_INVALID_ARGUMENT"); got != 1 {
		t.Errorf("acks_failed_INVALID_ARGUMENT = %d, want 1", got)
	}
	// The reactor answered the first request without pstest applying it:
	// only the transient one, sent again, is acked there.
	if got := f.acked(ids); got != 1 || f.srv.Message(messageOfAckID(transient)).Acks != 1 {
		t.Errorf("%d messages acked on the server, want only the one sent again", got)
	}
}

// pullAckIDs pulls n messages of sub with the unary Pull, as another
// process's subscriber would have received them, and returns their ack
// IDs.
func pullAckIDs(t *testing.T, f *fakeServer, sub model.Subscription, n int) []string {
	t.Helper()
	var ids []string
	deadline := time.Now().Add(waitLimit)
	for len(ids) < n {
		if time.Now().After(deadline) {
			t.Fatalf("pulled %d of %d messages within %v", len(ids), n, waitLimit)
		}
		resp, err := f.client.SubscriptionAdminClient.Pull(context.Background(), &pubsubpb.PullRequest{Subscription: sub.String(), MaxMessages: int32(n - len(ids))})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.GetReceivedMessages() {
			ids = append(ids, m.GetAckId())
		}
	}
	return ids
}

func counterByName(st *stats, name string) int64 {
	for i, n := range counterNames {
		if n == name {
			return st.get(counter(i))
		}
	}
	panic("no counter " + name)
}

// sendByID sends every request, resends what was refused for a transient
// reason, and returns what was refused for good with every request sent;
// a failure of a whole request ends it.
func TestSendByID(t *testing.T) {
	ids := make([]string, maxAckIDsPerRequest+2)
	for i := range ids {
		ids[i] = fmt.Sprint("ack-", i)
	}
	var sent [][]string
	err := sendByID(context.Background(), ids, func(chunk []string) error {
		sent = append(sent, chunk)
		switch len(sent) {
		case 1:
			return refusal(codes.InvalidArgument, map[string]string{ids[3]: ackIDFailure, ids[4]: transientAckIDFailure})
		case 3: // the second chunk
			return refusal(codes.InvalidArgument, map[string]string{ids[len(ids)-1]: ackIDFailure})
		}
		return nil
	})
	var refused *ackIDsRefused
	if !errors.As(err, &refused) || refused.code != codes.InvalidArgument || len(refused.reasons) != 2 ||
		refused.reasons[ids[3]] != ackIDFailure || refused.reasons[ids[len(ids)-1]] != ackIDFailure {
		t.Fatalf("sendByID = %v, want ack IDs 3 and %d refused", err, len(ids)-1)
	}
	if len(sent) != 3 || len(sent[0]) != maxAckIDsPerRequest || !slices.Equal(sent[1], []string{ids[4]}) || len(sent[2]) != 2 {
		t.Errorf("requests of %d, %v and %d ack IDs; want %d, the transient one again, then 2", len(sent[0]), sent[1], len(sent[2]), maxAckIDsPerRequest)
	}

	down := status.Error(codes.Unavailable, "down")
	sent = nil
	err = sendByID(context.Background(), ids, func(chunk []string) error { sent = append(sent, chunk); return down })
	if err != down || len(sent) != 1 {
		t.Errorf("sendByID with the service down = %v after %d requests, want its error after 1", err, len(sent))
	}
}
