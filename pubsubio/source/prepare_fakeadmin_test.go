package source

import (
	"context"
	"fmt"
	"sync"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

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
	// log is every call as "get NAME", "create NAME", "seek NAME", plus
	// whatever the test appends through event.
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

func (f *fakeAdmin) event(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, e)
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

func (f *fakeAdmin) getSubscription(_ context.Context, name string) (*pubsubpb.Subscription, error) {
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

func (f *fakeAdmin) createSubscription(_ context.Context, sub *pubsubpb.Subscription) (*pubsubpb.Subscription, error) {
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

func (f *fakeAdmin) seek(_ context.Context, req *pubsubpb.SeekRequest) error {
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

func (f *fakeAdmin) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}
