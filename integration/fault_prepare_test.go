package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// (d) Admin failures in the prepare step, injected by pstest reactors on
// the one subscription under test: the job fails at the prepare step with
// an error naming the subscription and saying what to do, and nothing is
// delivered from it. UNAVAILABLE is retried by the client (GetSubscription,
// CreateSubscription and Seek retry it for up to 60 s): a transient one is
// ridden out and the read goes on. A lasting one is not tested: it takes
// the client's 60 s, and in the one run tried the in-process Prism
// panicked the test binary right after ("ctrl.Recv failed ...
// DeadlineExceeded", prism/internal/worker/worker.go:316; not investigated).
func TestFaultPrepareAdminFailures(t *testing.T) {
	t.Parallel()
	const subID = "prep-fault"
	sub := pubsubio.SubscriptionOf(emulator.Project, subID)
	type setup int
	const (
		existing   setup = iota // the subscription exists, no Setup
		missing                 // it does not; Setup carries create options
		seekLatest              // pstest answers a snapshot seek Unimplemented before any reactor runs
	)
	cases := []struct {
		name   string
		method string
		code   codes.Code
		times  int // how many calls fail; 0 means every one
		setup  setup
		wants  []string // in the error; none when the job must succeed
	}{
		{"describe permission denied", "GetSubscription", codes.PermissionDenied, 0, existing, []string{"pubsub.subscriptions.get", "roles/pubsub.viewer"}},
		{"describe not found", "GetSubscription", codes.NotFound, 0, existing, []string{"does not exist", "Create.Topic"}},
		{"describe unavailable twice", "GetSubscription", codes.Unavailable, 2, existing, nil},
		{"create permission denied", "CreateSubscription", codes.PermissionDenied, 0, missing, []string{"pubsub.subscriptions.create", "roles/pubsub.editor"}},
		{"create topic not found", "CreateSubscription", codes.NotFound, 0, missing, []string{"does not exist", "never creates topics"}},
		{"create unavailable twice", "CreateSubscription", codes.Unavailable, 2, missing, nil},
		{"seek permission denied", "Seek", codes.PermissionDenied, 0, seekLatest, []string{"pubsub.subscriptions.consume", "roles/pubsub.subscriber"}},
		{"seek unavailable twice", "Seek", codes.Unavailable, 2, seekLatest, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var failures atomic.Int64
			e, srv := emulator.Fake(t, pstest.ServerReactorOption{FuncName: tc.method, Reactor: reactorFunc(func(req any) (bool, any, error) {
				if !namesSubscription(req, sub.String()) || (tc.times > 0 && failures.Load() >= int64(tc.times)) {
					return false, nil, nil
				}
				failures.Add(1)
				return true, nil, status.Errorf(tc.code, "injected %v on %s", tc.code, tc.method)
			})})
			client := e.Client(t)
			topic := e.CreateTopic(t, "prep-fault")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tc.setup != missing {
				if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub.String(), Topic: topic.String(), AckDeadlineSeconds: 10}); err != nil {
					t.Fatalf("creating %s: %v", sub, err)
				}
			}
			const n = 20
			ids := e.Publish(t, topic, n, 16, nil)
			cfg := pubsubio.ReadConfig{
				Subscriptions: []pubsubio.Subscription{sub},
				MaxMessages:   n,
				IdleTimeout:   30 * time.Second,
				Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
			}
			switch tc.setup {
			case missing:
				cfg.Setup = []pubsubio.SubscriptionSetup{{Subscription: sub, Create: pubsubio.SubscriptionCreateOptions{Topic: topic}}}
				// What was published before the subscription existed is not
				// its to deliver: a successful job only creates it, then idles.
				cfg.MaxMessages, cfg.IdleTimeout = 0, 2*time.Second
			case seekLatest:
				cfg.Setup = []pubsubio.SubscriptionSetup{{Subscription: sub, Start: pubsubio.StartLatest()}}
				// The seek drops the backlog: a successful job only seeks.
				cfg.MaxMessages, cfg.IdleTimeout = 0, 2*time.Second
			}
			p, bucket := readInto(t, cfg, nil)
			start := time.Now()
			if tc.wants == nil {
				runCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := beamx.RunWithMetrics(runCtx, p)
				if err != nil {
					t.Fatalf("the job failed although %s failed only %d times (UNAVAILABLE is retried): %v", tc.method, tc.times, err)
				}
				if got := failures.Load(); got != int64(tc.times) {
					t.Errorf("%d injected failures, want %d", got, tc.times)
				}
				switch tc.setup {
				case existing:
					wantAll(t, tc.name, bucket, sub, ids)
				case missing:
					if got := counter(res, "subscriptions_created"); got != 1 {
						t.Errorf("subscriptions_created %d, want 1", got)
					}
				case seekLatest:
					if got := counter(res, "seeks_performed"); got != 1 {
						t.Errorf("seeks_performed %d, want 1", got)
					}
				}
				t.Logf("%s: %d injected UNAVAILABLE, job ok in %v", tc.method, failures.Load(), time.Since(start).Round(time.Millisecond))
				return
			}
			err := runFails(t, p)
			wantInError(t, err, append([]string{sub.String()}, tc.wants...)...)
			if collect.Len(bucket) != 0 {
				t.Errorf("the failed job emitted %d messages", collect.Len(bucket))
			}
			for _, id := range ids {
				if m := srv.Message(id); m.Deliveries != 0 {
					t.Errorf("message %s delivered %d times by a job whose prepare step failed", id, m.Deliveries)
				}
			}
			t.Logf("%s %v x%d: job failed in %v: %s", tc.method, tc.code, failures.Load(), time.Since(start).Round(time.Millisecond), excerpt(err, "pubsubio.Read: "))
		})
	}
}

// namesSubscription says whether an admin request is about sub.
func namesSubscription(req any, sub string) bool {
	switch r := req.(type) {
	case *pubsubpb.GetSubscriptionRequest:
		return r.GetSubscription() == sub
	case *pubsubpb.Subscription:
		return r.GetName() == sub
	case *pubsubpb.SeekRequest:
		return r.GetSubscription() == sub
	}
	return false
}
