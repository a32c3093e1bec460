package connection

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// A call to an endpoint that never answers, refusing connections or
// accepting them and staying silent, fails within RPCTimeout with an error
// naming the call, the endpoint and the option, after logging while it
// waited.
func TestCallToAnEndpointThatNeverAnswers(t *testing.T) {
	for name, endpoint := range map[string]string{"refused": deadAddr(t), "silent": silentAddr(t)} {
		t.Run(name, func(t *testing.T) {
			logs := recordLogs(t)
			s := Settings{EmulatorEndpoint: endpoint, RPCTimeout: 2 * time.Second}
			c, err := NewClient(context.Background(), fakeProject, s)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sub := "projects/" + fakeProject + "/subscriptions/s"
			errc := make(chan error, 1)
			go func() {
				errc <- s.Call(context.Background(), "pubsubio.Read", "GetSubscription "+sub, func(ctx context.Context) error {
					_, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: sub})
					return err
				})
			}()
			select {
			case err = <-errc:
			case <-time.After(time.Minute):
				t.Fatal("the call did not return within a minute with RPCTimeout 2s")
			}
			for _, want := range []string{"GetSubscription " + sub, "at " + endpoint, "no answer within Connection.RPCTimeout 2s"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v does not contain %q", err, want)
				}
			}
			if got := logs.matching("GetSubscription " + sub + " at " + endpoint + " has not answered"); len(got) == 0 {
				t.Errorf("nothing naming the call and the endpoint was logged while the call waited; logs: %q", logs.all())
			}
		})
	}
}

// A call under a caller's deadline sooner than RPCTimeout says so, rather
// than advise raising RPCTimeout.
func TestCallNamesTheCallersDeadline(t *testing.T) {
	s := Settings{EmulatorEndpoint: deadAddr(t)}
	c, err := NewClient(context.Background(), fakeProject, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = s.Call(ctx, "pubsubio.Read", "Acknowledge s", func(ctx context.Context) error {
		return c.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: "projects/" + fakeProject + "/subscriptions/s", AckIds: []string{"a"}})
	})
	if err == nil || !strings.Contains(err.Error(), "no answer within the step's own") || strings.Contains(err.Error(), "RPCTimeout") {
		t.Errorf("error %v, want it to name the caller's deadline and not RPCTimeout", err)
	}
}

// A call that fails for a reason of its own keeps its error as it is: the
// caller describes it.
func TestCallKeepsOtherErrors(t *testing.T) {
	tr := newTrap(t)
	s := Settings{EmulatorEndpoint: tr.addr}
	c, err := NewClient(context.Background(), fakeProject, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = s.Call(context.Background(), "pubsubio.Read", "GetTopic t", func(ctx context.Context) error {
		_, err := c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: "projects/" + fakeProject + "/topics/t"})
		return err
	})
	if !tr.reached(err) || strings.Contains(err.Error(), "no answer") {
		t.Errorf("error %v, want the server's own answer, unwrapped", err)
	}
}

// logRecorder keeps what Beam's log is given while a test runs.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Log(_ context.Context, _ log.Severity, _ int, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, msg)
}

func (r *logRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

func (r *logRecorder) matching(sub string) []string {
	var out []string
	for _, l := range r.all() {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// recordLogs routes Beam's log to a recorder until the test ends.
func recordLogs(t *testing.T) *logRecorder {
	r := &logRecorder{}
	log.SetLogger(r)
	t.Cleanup(func() { log.SetLogger(&log.Structural{}) })
	return r
}
