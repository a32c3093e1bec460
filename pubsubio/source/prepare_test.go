package source

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var prepareNow = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

// existingSub is a subscription as Pub/Sub describes it, on setupTopic.
func existingSub(sub model.Subscription, edit func(*pubsubpb.Subscription)) *pubsubpb.Subscription {
	s := &pubsubpb.Subscription{Name: sub.String(), Topic: setupTopic.String(), AckDeadlineSeconds: 10}
	if edit != nil {
		edit(s)
	}
	return s
}

// preparePlan is the plan of a valid configuration reading subs with
// setup.
func preparePlan(t *testing.T, subs []model.Subscription, edit func(*Config), setup ...SubscriptionSetup) readPlan {
	t.Helper()
	p := testPlan(t, func(c *Config) {
		c.Subscriptions, c.Setup = subs, setup
		if edit != nil {
			edit(c)
		}
	})
	// No risks: the dead-letter warnings are
	// TestPrepareWarnsAboutATightDeadLetterPolicy's.
	p.Risks = attemptRisks{}
	return p
}

func runPrepare(t *testing.T, adm *fakeAdmin, p readPlan) (prepareCounts, error) {
	t.Helper()
	return prepare(context.Background(), adm, p, func() time.Time { return prepareNow })
}

func wantErrorContaining(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("prepare succeeded; want an error containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

// wantOnlyDescribes checks that nothing but GetSubscription was called.
func wantOnlyDescribes(t *testing.T, adm *fakeAdmin) {
	t.Helper()
	if c, s := adm.count("create"), adm.count("seek"); c != 0 || s != 0 {
		t.Errorf("%d creates and %d seeks issued although a rejection was coming; calls: %q", c, s, adm.calls())
	}
}

// Every rejection fails the prepare step with an error naming the
// subscription, the setting and what to do, and counts it.
func TestPrepareRejections(t *testing.T) {
	sub := testSubs(1)[0]
	cases := []struct {
		name     string
		existing []*pubsubpb.Subscription
		edit     func(*Config)
		wants    []string
	}{
		{"PER_KEY on an unordered subscription", []*pubsubpb.Subscription{existingSub(sub, nil)},
			func(c *Config) { c.Ordering = OrderingPerKey },
			[]string{sub.String(), "message ordering is disabled", "PER_KEY", "fixed at creation", "Ordering NONE"}},
		{"exactly-once delivery with short lease extensions", []*pubsubpb.Subscription{existingSub(sub, func(s *pubsubpb.Subscription) { s.EnableExactlyOnceDelivery = true })},
			func(c *Config) { c.MaxDurationPerAckExtension = 30 * time.Second },
			[]string{sub.String(), "exactly-once delivery is enabled and MaxDurationPerAckExtension is 30s", "at least 60 s", "MaxDurationPerAckExtension unset or at least 60s"}},
		{"NACK without a dead-letter policy", []*pubsubpb.Subscription{existingSub(sub, nil)},
			func(c *Config) { c.DecodePolicy = model.DecodeNack },
			[]string{sub.String(), "no dead-letter policy", "redelivered forever", "--dead-letter-topic", "DecodePolicy DEAD_LETTER"}},
		{"missing without create options", nil, nil,
			[]string{sub.String(), "does not exist", "no create options", "Setup", "Create.Topic"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adm := newFakeAdmin(c.existing...)
			counts, err := runPrepare(t, adm, preparePlan(t, []model.Subscription{sub}, c.edit))
			wantErrorContaining(t, err, append(c.wants, "nothing was created or sought")...)
			if counts.rejected != 1 {
				t.Errorf("rejected %d, want 1", counts.rejected)
			}
			wantOnlyDescribes(t, adm)
		})
	}
}

// A subscription with exactly-once delivery is read, unless
// MaxDurationPerAckExtension asks for less than the client's 60 s.
func TestPrepareAcceptsExactlyOnce(t *testing.T) {
	sub := testSubs(1)[0]
	for _, extension := range []time.Duration{0, time.Minute} {
		adm := newFakeAdmin(existingSub(sub, func(s *pubsubpb.Subscription) { s.EnableExactlyOnceDelivery = true }))
		counts, err := runPrepare(t, adm, preparePlan(t, []model.Subscription{sub}, func(c *Config) { c.MaxDurationPerAckExtension = extension }))
		if err != nil || counts.rejected != 0 {
			t.Errorf("MaxDurationPerAckExtension %v: %v, %d rejected; want the subscription read", extension, err, counts.rejected)
		}
	}
}

// One rejection anywhere stops every creation and seek, including those of
// subscriptions described before the rejected one; every problem is named
// in the one error.
func TestPrepareNoActionWhenAnyRejectionIsComing(t *testing.T) {
	subs := testSubs(4)
	adm := newFakeAdmin(
		existingSub(subs[1], nil),
		existingSub(subs[2], func(s *pubsubpb.Subscription) { s.EnableExactlyOnceDelivery = true }),
	)
	adm.errs["get "+subs[3].String()] = status.Error(codes.Unavailable, "try again")
	cfg := preparePlan(t, subs, func(c *Config) { c.MaxDurationPerAckExtension = 30 * time.Second },
		SubscriptionSetup{Subscription: subs[0], Create: SubscriptionCreateOptions{Topic: setupTopic}, Start: StartLatest()},
		SubscriptionSetup{Subscription: subs[1], Start: StartFromTimestamp(prepareNow.Add(-time.Hour))},
	)
	counts, err := runPrepare(t, adm, cfg)
	wantErrorContaining(t, err, subs[2].String(), "exactly-once", subs[3].String(), "try again")
	wantOnlyDescribes(t, adm)
	if got := adm.count("get"); got != len(subs) {
		t.Errorf("%d subscriptions described, want all %d before deciding: %q", got, len(subs), adm.calls())
	}
	if counts != (prepareCounts{rejected: 1}) {
		t.Errorf("counts %+v, want one rejection and nothing else", counts)
	}
}

// Each missing subscription is created with its own create options, after
// every subscription was described.
func TestPrepareCreatesEachWithItsOwnSettings(t *testing.T) {
	subs := testSubs(3)
	other := model.TopicOf("pubsubio-test", "returns")
	optsA := SubscriptionCreateOptions{Topic: setupTopic, AckDeadline: time.Minute, RetainAckedMessages: true, Filter: `attributes:kind`}
	optsB := SubscriptionCreateOptions{Topic: other, EnableMessageOrdering: true, NeverExpire: true, DeadLetterTopic: deadTopic, MaxDeliveryAttempts: 9}
	adm := newFakeAdmin(existingSub(subs[1], nil))
	cfg := preparePlan(t, subs, nil,
		SubscriptionSetup{Subscription: subs[0], Create: optsA},
		// Create options on an existing subscription are not applied.
		SubscriptionSetup{Subscription: subs[1], Create: optsB},
		SubscriptionSetup{Subscription: subs[2], Create: optsB},
	)
	counts, err := runPrepare(t, adm, cfg)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	want := []*pubsubpb.Subscription{optsA.subscriptionProto(subs[0]), optsB.subscriptionProto(subs[2])}
	if len(adm.created) != len(want) {
		t.Fatalf("created %v, want %v", adm.created, want)
	}
	for i := range want {
		if !proto.Equal(adm.created[i], want[i]) {
			t.Errorf("created\n %v\nwant %v", adm.created[i], want[i])
		}
	}
	wantCalls := []string{"get " + subs[0].String(), "get " + subs[1].String(), "get " + subs[2].String(), "create " + subs[0].String(), "create " + subs[2].String()}
	if got := adm.calls(); !slices.Equal(got, wantCalls) {
		t.Errorf("calls %q, want %q", got, wantCalls)
	}
	if counts != (prepareCounts{created: 2}) {
		t.Errorf("counts %+v, want two creations", counts)
	}
	if !proto.Equal(adm.subs[subs[1].String()], existingSub(subs[1], nil)) {
		t.Errorf("the existing subscription was changed to %v", adm.subs[subs[1].String()])
	}
}

// ALREADY_EXISTS (another job created it between describe and create) is
// success: the subscription keeps its own settings, which are then checked.
func TestPrepareAlreadyExistsLeavesTheExistingOneAlone(t *testing.T) {
	sub := testSubs(1)[0]
	theirs := existingSub(sub, func(s *pubsubpb.Subscription) {
		s.AckDeadlineSeconds = 99
		s.MessageRetentionDuration = durationpb.New(time.Hour)
	})
	adm := newFakeAdmin()
	adm.racing[sub.String()] = theirs
	cfg := preparePlan(t, []model.Subscription{sub}, nil,
		SubscriptionSetup{Subscription: sub, Create: SubscriptionCreateOptions{Topic: setupTopic, AckDeadline: 20 * time.Second}, Start: StartLatest()})
	counts, err := runPrepare(t, adm, cfg)
	if err != nil {
		t.Fatalf("ALREADY_EXISTS failed the prepare step: %v", err)
	}
	if !proto.Equal(adm.subs[sub.String()], theirs) {
		t.Errorf("the subscription another job created became %v, want it untouched: %v", adm.subs[sub.String()], theirs)
	}
	wantCalls := []string{"get " + sub.String(), "create " + sub.String(), "get " + sub.String(), "seek " + sub.String()}
	if got := adm.calls(); !slices.Equal(got, wantCalls) {
		t.Errorf("calls %q, want %q", got, wantCalls)
	}
	if counts != (prepareCounts{seeks: 1, warned: 0}) {
		t.Errorf("counts %+v, want one seek and no creation counted", counts)
	}

	// Another job's subscription the read cannot consume is rejected, and
	// nothing is sought.
	adm = newFakeAdmin()
	adm.racing[sub.String()] = existingSub(sub, func(s *pubsubpb.Subscription) { s.EnableExactlyOnceDelivery = true })
	cfg.Cfg.MaxDurationPerAckExtension = 30 * time.Second
	counts, err = runPrepare(t, adm, cfg)
	wantErrorContaining(t, err, sub.String(), "created by someone else", "exactly-once", "nothing was sought")
	if adm.count("seek") != 0 || counts.rejected != 1 {
		t.Errorf("seeks %d, rejected %d; want none and 1", adm.count("seek"), counts.rejected)
	}
}

// Every start position seeks its subscription exactly once, after every
// describe and creation; the default position never seeks.
func TestPrepareSeeksEachStartPositionOnce(t *testing.T) {
	subs := testSubs(5)
	var existing []*pubsubpb.Subscription
	for _, s := range subs[:4] {
		existing = append(existing, existingSub(s, func(s *pubsubpb.Subscription) { s.RetainAckedMessages = true }))
	}
	adm := newFakeAdmin(existing...)
	at := prepareNow.Add(-2 * time.Hour)
	cfg := preparePlan(t, subs, nil,
		SubscriptionSetup{Subscription: subs[0], Start: StartEarliestRetained()},
		SubscriptionSetup{Subscription: subs[1], Start: StartLatest()},
		SubscriptionSetup{Subscription: subs[2], Start: StartFromTimestamp(at)},
		SubscriptionSetup{Subscription: subs[3], Start: StartFromSnapshot("snap")},
		SubscriptionSetup{Subscription: subs[4], Create: SubscriptionCreateOptions{Topic: setupTopic}},
	)
	counts, err := runPrepare(t, adm, cfg)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	want := []*pubsubpb.SeekRequest{
		seekToTime(subs[0], prepareNow.Add(-31*24*time.Hour)),
		seekToTime(subs[1], prepareNow),
		seekToTime(subs[2], at),
		seekToSnapshot(subs[3], "projects/pubsubio-test/snapshots/snap"),
	}
	if len(adm.seeks) != len(want) {
		t.Fatalf("seeks %v, want %v", adm.seeks, want)
	}
	for i := range want {
		if !proto.Equal(adm.seeks[i], want[i]) {
			t.Errorf("seek %d: %v, want %v", i, adm.seeks[i], want[i])
		}
	}
	calls := adm.calls()
	firstSeek := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "seek ") })
	if i := slices.Index(calls, "create "+subs[4].String()); i < 0 || i > firstSeek {
		t.Errorf("calls %q: the creation does not precede every seek", calls)
	}
	if counts != (prepareCounts{created: 1, seeks: 4}) {
		t.Errorf("counts %+v, want 1 creation and 4 seeks", counts)
	}
}

// A backwards start position on a subscription that retains neither acked
// messages nor has topic retention is warned about and counted, and still
// runs; where either retention exists, or the position is not backwards,
// there is no warning.
func TestPrepareWarnsWhenBackwardsPositionCannotReplayAcked(t *testing.T) {
	sub := testSubs(1)[0]
	cases := []struct {
		name string
		desc func(*pubsubpb.Subscription)
		pos  StartPosition
		warn bool
	}{
		{"timestamp, no retention", nil, StartFromTimestamp(prepareNow.Add(-time.Hour)), true},
		{"earliest, no retention", nil, StartEarliestRetained(), true},
		{"earliest, retains acked", func(s *pubsubpb.Subscription) { s.RetainAckedMessages = true }, StartEarliestRetained(), false},
		{"earliest, topic retention", func(s *pubsubpb.Subscription) { s.TopicMessageRetentionDuration = durationpb.New(time.Hour) }, StartEarliestRetained(), false},
		{"latest, no retention", nil, StartLatest(), false},
		{"snapshot, no retention", nil, StartFromSnapshot("snap"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adm := newFakeAdmin(existingSub(sub, c.desc))
			counts, err := runPrepare(t, adm, preparePlan(t, []model.Subscription{sub}, nil, SubscriptionSetup{Subscription: sub, Start: c.pos}))
			if err != nil {
				t.Fatalf("prepare: %v", err)
			}
			if got := counts.warned == 1; got != c.warn {
				t.Errorf("warned %d, want warning %v", counts.warned, c.warn)
			}
			if counts.seeks != 1 {
				t.Errorf("seeks %d, want 1", counts.seeks)
			}
		})
	}
	msg := retentionWarning(sub.String(), StartEarliestRetained(), existingSub(sub, nil))
	for _, want := range []string{sub.String(), "EARLIEST_RETAINED", "never acked", "retain acked messages", "message retention on the topic"} {
		if !strings.Contains(msg, want) {
			t.Errorf("warning does not contain %q: %s", want, msg)
		}
	}
}

// PERMISSION_DENIED from any call names the permission that was missing.
func TestPreparePermissionDeniedNamesThePermission(t *testing.T) {
	sub := testSubs(1)[0]
	denied := status.Error(codes.PermissionDenied, "User not authorized to perform this action.")
	cases := []struct {
		name  string
		call  string
		start StartPosition
		exist bool
		wants []string
	}{
		{"get", "get", StartPosition{}, true, []string{"permission denied describing", sub.String(), "pubsub.subscriptions.get", "roles/pubsub.viewer"}},
		{"create", "create", StartPosition{}, false, []string{"permission denied creating", sub.String(), "pubsub.subscriptions.create", "project pubsubio-test",
			"pubsub.topics.attachSubscription", setupTopic.String(), "roles/pubsub.editor"}},
		{"seek to a time", "seek", StartLatest(), true, []string{"permission denied seeking", sub.String(), "pubsub.subscriptions.consume", "roles/pubsub.subscriber"}},
		{"seek to a snapshot", "seek", StartFromSnapshot("snap"), true, []string{"permission denied seeking", "pubsub.subscriptions.consume",
			"pubsub.snapshots.seek on projects/pubsubio-test/snapshots/snap"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adm := newFakeAdmin()
			if c.exist {
				adm = newFakeAdmin(existingSub(sub, nil))
			}
			adm.errs[c.call+" "+sub.String()] = denied
			cfg := preparePlan(t, []model.Subscription{sub}, nil,
				SubscriptionSetup{Subscription: sub, Create: SubscriptionCreateOptions{Topic: setupTopic}, Start: c.start})
			_, err := runPrepare(t, adm, cfg)
			wantErrorContaining(t, err, c.wants...)
			if !errors.Is(err, denied) {
				t.Errorf("error does not wrap the service's: %v", err)
			}
		})
	}
}

// Other failures of a call say what to do.
func TestPrepareCallFailuresSayWhatToDo(t *testing.T) {
	sub := testSubs(1)[0]
	cases := []struct {
		name  string
		call  string
		err   error
		start StartPosition
		exist bool
		wants []string
	}{
		{"create on a missing topic", "create", status.Error(codes.NotFound, "Topic not found"), StartPosition{}, false,
			[]string{"creating " + sub.String(), setupTopic.String(), "does not exist", "never creates topics"}},
		{"seek to a missing snapshot", "seek", status.Error(codes.NotFound, "Snapshot not found"), StartFromSnapshot("gone"), true,
			[]string{"snapshot projects/pubsubio-test/snapshots/gone does not exist"}},
		{"seek to a snapshot of another topic", "seek", status.Error(codes.FailedPrecondition, "mismatched topic"), StartFromSnapshot("other"), true,
			[]string{"projects/pubsubio-test/snapshots/other", "topic it was taken from"}},
		{"seek the emulator cannot do", "seek", status.Error(codes.Unimplemented, "Unimplemented"), StartLatest(), true,
			[]string{"does not implement", "emulator", "ordering-enabled"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adm := newFakeAdmin()
			if c.exist {
				adm = newFakeAdmin(existingSub(sub, nil))
			}
			adm.errs[c.call+" "+sub.String()] = c.err
			cfg := preparePlan(t, []model.Subscription{sub}, nil,
				SubscriptionSetup{Subscription: sub, Create: SubscriptionCreateOptions{Topic: setupTopic}, Start: c.start})
			_, err := runPrepare(t, adm, cfg)
			wantErrorContaining(t, err, c.wants...)
			if !errors.Is(err, c.err) {
				t.Errorf("error does not wrap the service's %v: %v", c.err, err)
			}
		})
	}
}
