package prepare

import (
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

// Every rejection fails the prepare step with an error naming the
// subscription, the setting and what to do, and counts it.
func TestPrepareRejections(t *testing.T) {
	sub := testSubs(1)[0]
	cases := []struct {
		name     string
		existing []*pubsubpb.Subscription
		edit     func(*Job)
		wants    []string
	}{
		{"PER_KEY on an unordered subscription", []*pubsubpb.Subscription{existingSub(sub, nil)},
			func(j *Job) { j.Needs.OrderingPerKey = true },
			[]string{sub.String(), "message ordering is disabled", "PER_KEY", "fixed at creation", "Ordering NONE"}},
		{"exactly-once delivery with short lease extensions", []*pubsubpb.Subscription{existingSub(sub, func(s *pubsubpb.Subscription) { s.EnableExactlyOnceDelivery = true })},
			func(j *Job) { j.Needs.MaxDurationPerAckExtension = 30 * time.Second },
			[]string{sub.String(), "exactly-once delivery is enabled and MaxDurationPerAckExtension is 30s", "at least 60 s", "MaxDurationPerAckExtension unset or at least 60s"}},
		{"NACK without a dead-letter policy", []*pubsubpb.Subscription{existingSub(sub, nil)},
			func(j *Job) { j.Needs.DecodePolicy = model.DecodeNack },
			[]string{sub.String(), "no dead-letter policy", "redelivered forever", "--dead-letter-topic", "DecodePolicy DEAD_LETTER"}},
		{"missing without create options", nil, nil,
			[]string{sub.String(), "does not exist", "no create options", "Setup", "Create.Topic"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adm := newFakeAdmin(c.existing...)
			counts, err := runPrepare(t, adm, testJob([]model.Subscription{sub}, c.edit))
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
		counts, err := runPrepare(t, adm, testJob([]model.Subscription{sub}, func(j *Job) { j.Needs.MaxDurationPerAckExtension = extension }))
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
	cfg := testJob(subs, func(j *Job) { j.Needs.MaxDurationPerAckExtension = 30 * time.Second },
		SubscriptionSetup{Subscription: subs[0], Create: SubscriptionCreateOptions{Topic: setupTopic}, Start: StartPosition{Kind: PositionLatest}},
		SubscriptionSetup{Subscription: subs[1], Start: StartPosition{Kind: PositionTimestamp, Time: prepareNow.Add(-time.Hour)}},
	)
	counts, err := runPrepare(t, adm, cfg)
	wantErrorContaining(t, err, subs[2].String(), "exactly-once", subs[3].String(), "try again")
	wantOnlyDescribes(t, adm)
	if got := adm.count("get"); got != len(subs) {
		t.Errorf("%d subscriptions described, want all %d before deciding: %q", got, len(subs), adm.calls())
	}
	if counts != (Counts{rejected: 1}) {
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
	cfg := testJob(subs, nil,
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
	if counts != (Counts{created: 2}) {
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
	cfg := testJob([]model.Subscription{sub}, nil,
		SubscriptionSetup{Subscription: sub, Create: SubscriptionCreateOptions{Topic: setupTopic, AckDeadline: 20 * time.Second}, Start: StartPosition{Kind: PositionLatest}})
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
	if counts != (Counts{seeks: 1, warned: 0}) {
		t.Errorf("counts %+v, want one seek and no creation counted", counts)
	}

	// Another job's subscription the read cannot consume is rejected, and
	// nothing is sought.
	adm = newFakeAdmin()
	adm.racing[sub.String()] = existingSub(sub, func(s *pubsubpb.Subscription) { s.EnableExactlyOnceDelivery = true })
	cfg.Needs.MaxDurationPerAckExtension = 30 * time.Second
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
	cfg := testJob(subs, nil,
		SubscriptionSetup{Subscription: subs[0], Start: StartPosition{Kind: PositionEarliestRetained}},
		SubscriptionSetup{Subscription: subs[1], Start: StartPosition{Kind: PositionLatest}},
		SubscriptionSetup{Subscription: subs[2], Start: StartPosition{Kind: PositionTimestamp, Time: at}},
		SubscriptionSetup{Subscription: subs[3], Start: StartPosition{Kind: PositionSnapshot, Snapshot: "snap"}},
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
	if counts != (Counts{created: 1, seeks: 4}) {
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
		{"timestamp, no retention", nil, StartPosition{Kind: PositionTimestamp, Time: prepareNow.Add(-time.Hour)}, true},
		{"earliest, no retention", nil, StartPosition{Kind: PositionEarliestRetained}, true},
		{"earliest, retains acked", func(s *pubsubpb.Subscription) { s.RetainAckedMessages = true }, StartPosition{Kind: PositionEarliestRetained}, false},
		{"earliest, topic retention", func(s *pubsubpb.Subscription) { s.TopicMessageRetentionDuration = durationpb.New(time.Hour) }, StartPosition{Kind: PositionEarliestRetained}, false},
		{"latest, no retention", nil, StartPosition{Kind: PositionLatest}, false},
		{"snapshot, no retention", nil, StartPosition{Kind: PositionSnapshot, Snapshot: "snap"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adm := newFakeAdmin(existingSub(sub, c.desc))
			counts, err := runPrepare(t, adm, testJob([]model.Subscription{sub}, nil, SubscriptionSetup{Subscription: sub, Start: c.pos}))
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
	msg := retentionWarning(sub.String(), StartPosition{Kind: PositionEarliestRetained}, existingSub(sub, nil))
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
		{"seek to a time", "seek", StartPosition{Kind: PositionLatest}, true, []string{"permission denied seeking", sub.String(), "pubsub.subscriptions.consume", "roles/pubsub.subscriber"}},
		{"seek to a snapshot", "seek", StartPosition{Kind: PositionSnapshot, Snapshot: "snap"}, true, []string{"permission denied seeking", "pubsub.subscriptions.consume",
			"pubsub.snapshots.seek on projects/pubsubio-test/snapshots/snap"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adm := newFakeAdmin()
			if c.exist {
				adm = newFakeAdmin(existingSub(sub, nil))
			}
			adm.errs[c.call+" "+sub.String()] = denied
			cfg := testJob([]model.Subscription{sub}, nil,
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
		{"seek to a missing snapshot", "seek", status.Error(codes.NotFound, "Snapshot not found"), StartPosition{Kind: PositionSnapshot, Snapshot: "gone"}, true,
			[]string{"snapshot projects/pubsubio-test/snapshots/gone does not exist"}},
		{"seek to a snapshot of another topic", "seek", status.Error(codes.FailedPrecondition, "mismatched topic"), StartPosition{Kind: PositionSnapshot, Snapshot: "other"}, true,
			[]string{"projects/pubsubio-test/snapshots/other", "topic it was taken from"}},
		{"seek the emulator cannot do", "seek", status.Error(codes.Unimplemented, "Unimplemented"), StartPosition{Kind: PositionLatest}, true,
			[]string{"does not implement", "emulator", "ordering-enabled"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adm := newFakeAdmin()
			if c.exist {
				adm = newFakeAdmin(existingSub(sub, nil))
			}
			adm.errs[c.call+" "+sub.String()] = c.err
			cfg := testJob([]model.Subscription{sub}, nil,
				SubscriptionSetup{Subscription: sub, Create: SubscriptionCreateOptions{Topic: setupTopic}, Start: c.start})
			_, err := runPrepare(t, adm, cfg)
			wantErrorContaining(t, err, c.wants...)
			if !errors.Is(err, c.err) {
				t.Errorf("error does not wrap the service's %v: %v", c.err, err)
			}
		})
	}
}
