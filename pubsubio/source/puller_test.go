package source

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// A split whose worker cannot reach Pub/Sub (here an endpoint that accepts
// connections and never answers) fails within Connection.RPCTimeout, with
// an error naming the call and the endpoint, instead of streaming in
// silence for ever.
func TestReceiveFromAnEndpointThatNeverAnswersFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	sub := model.SubscriptionOf(testProject, "orders")
	cfg := testConfig(t, func(c *Config) {
		c.Subscriptions = []model.Subscription{sub}
		c.Connection = connection.Settings{EmulatorEndpoint: l.Addr().String(), RPCTimeout: 2 * time.Second}
	})
	p, err := dialPuller(context.Background(), sub, cfg, newGivenBack(cfg.WatermarkWindow, newStats()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	errc := make(chan error, 1)
	go func() {
		errc <- p.receive(context.Background(), func(*pubsub.Message) bool { return true })
	}()
	select {
	case err = <-errc:
	case <-time.After(time.Minute):
		t.Fatal("receive from a silent endpoint did not return within a minute with RPCTimeout 2s")
	}
	for _, want := range []string{"GetSubscription " + sub.String(), "at " + l.Addr().String(), "RPCTimeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("receive error %v does not contain %q", err, want)
		}
	}
}
