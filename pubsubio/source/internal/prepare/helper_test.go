package prepare

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var (
	prepareNow = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	setupSub   = model.SubscriptionOf("pubsubio-test", "sub-0")
	setupTopic = model.TopicOf("pubsubio-test", "orders")
	deadTopic  = model.TopicOf("pubsubio-test", "orders-dead")
)

func testSubs(n int) []model.Subscription {
	subs := make([]model.Subscription, n)
	for i := range subs {
		subs[i] = model.SubscriptionOf("pubsubio-test", fmt.Sprintf("sub-%d", i))
	}
	return subs
}

// existingSub is a subscription as Pub/Sub describes it, on setupTopic.
func existingSub(sub model.Subscription, edit func(*pubsubpb.Subscription)) *pubsubpb.Subscription {
	s := &pubsubpb.Subscription{Name: sub.String(), Topic: setupTopic.String(), AckDeadlineSeconds: 10}
	if edit != nil {
		edit(s)
	}
	return s
}

// testJob is the job of a read of subs with setup, needing nothing of them
// but what edit sets, and with no risks: the dead-letter warnings are
// TestPrepareWarnsAboutATightDeadLetterPolicy's.
func testJob(subs []model.Subscription, edit func(*Job), setup ...SubscriptionSetup) Job {
	j := Job{Subscriptions: subs, Setup: SetupWithDefaults(setup)}
	if edit != nil {
		edit(&j)
	}
	return j
}

// topicJob is the job of a read of topics under opts.
func topicJob(t *testing.T, opts TopicSubscriptionOptions, topics ...model.Topic) Job {
	t.Helper()
	owned, setup, errs := WithTopics(topics, opts, nil, Requirements{})
	if len(errs) > 0 {
		t.Fatalf("WithTopics: %v", errs)
	}
	return Job{Subscriptions: owned.Subscriptions, Setup: SetupWithDefaults(setup), Owned: owned}
}

func runPrepare(t *testing.T, adm *fakeAdmin, p Job) (Counts, error) {
	t.Helper()
	return Run(context.Background(), adm, p, func() time.Time { return prepareNow })
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

// fakeAdmin is an in-memory admin that records every call in order, so
// tests can say what the prepare step did and in which order.
type fakeAdmin struct {
	mu sync.Mutex
	// subs are the existing subscriptions by full name.
	subs map[string]*pubsubpb.Subscription
	// errs fail a call: key "get NAME", "create NAME" or "seek NAME".
	errs map[string]error
	// racing makes a create of NAME find this subscription made by someone
	// else since the describe: it is installed and ALREADY_EXISTS returned.
	racing map[string]*pubsubpb.Subscription
	// log is every call as "get NAME", "create NAME", "seek NAME",
	// "update NAME" or "delete NAME".
	log []string
	// created and seeks are the requests of successful calls.
	created []*pubsubpb.Subscription
	seeks   []*pubsubpb.SeekRequest
	closed  int
}

func newFakeAdmin(existing ...*pubsubpb.Subscription) *fakeAdmin {
	f := &fakeAdmin{subs: map[string]*pubsubpb.Subscription{}, errs: map[string]error{}, racing: map[string]*pubsubpb.Subscription{}}
	for _, s := range existing {
		f.subs[s.GetName()] = s
	}
	return f
}

func (f *fakeAdmin) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// count returns how many calls of verb ("get", "create", "seek") were made.
func (f *fakeAdmin) count(verb string) int {
	n := 0
	for _, c := range f.calls() {
		var v, name string
		if _, err := fmt.Sscan(c, &v, &name); err == nil && v == verb {
			n++
		}
	}
	return n
}

func (f *fakeAdmin) GetSubscription(_ context.Context, name string) (*pubsubpb.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "get "+name)
	if err := f.errs["get "+name]; err != nil {
		return nil, err
	}
	s, ok := f.subs[name]
	if !ok {
		return nil, status.Error(codes.NotFound, "Resource not found (resource="+name+").")
	}
	return proto.Clone(s).(*pubsubpb.Subscription), nil
}

func (f *fakeAdmin) CreateSubscription(_ context.Context, sub *pubsubpb.Subscription) (*pubsubpb.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := sub.GetName()
	f.log = append(f.log, "create "+name)
	if err := f.errs["create "+name]; err != nil {
		return nil, err
	}
	if r := f.racing[name]; r != nil {
		f.subs[name] = r
	}
	if _, ok := f.subs[name]; ok {
		return nil, status.Error(codes.AlreadyExists, "Resource already exists in the project (resource="+name+").")
	}
	f.created = append(f.created, proto.Clone(sub).(*pubsubpb.Subscription))
	f.subs[name] = proto.Clone(sub).(*pubsubpb.Subscription)
	return proto.Clone(sub).(*pubsubpb.Subscription), nil
}

func (f *fakeAdmin) Seek(_ context.Context, req *pubsubpb.SeekRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "seek "+req.GetSubscription())
	if err := f.errs["seek "+req.GetSubscription()]; err != nil {
		return err
	}
	if _, ok := f.subs[req.GetSubscription()]; !ok {
		return status.Error(codes.NotFound, "Resource not found (resource="+req.GetSubscription()+").")
	}
	f.seeks = append(f.seeks, proto.Clone(req).(*pubsubpb.SeekRequest))
	return nil
}

func (f *fakeAdmin) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

// DeleteSubscription deletes: NOT_FOUND when missing.
func (f *fakeAdmin) DeleteSubscription(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "delete "+name)
	if err := f.errs["delete "+name]; err != nil {
		return err
	}
	if _, ok := f.subs[name]; !ok {
		return status.Error(codes.NotFound, "Resource not found (resource="+name+").")
	}
	delete(f.subs, name)
	return nil
}

// UpdateLabels replaces a subscription's labels.
func (f *fakeAdmin) UpdateLabels(_ context.Context, name string, labels map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "update "+name)
	if err := f.errs["update "+name]; err != nil {
		return err
	}
	s, ok := f.subs[name]
	if !ok {
		return status.Error(codes.NotFound, "Resource not found (resource="+name+").")
	}
	s.Labels = maps.Clone(labels)
	return nil
}
