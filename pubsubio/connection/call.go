package connection

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
)

// DefaultRPCTimeout is used when Settings.RPCTimeout is zero: long enough
// for the client to ride out a brief outage with its retries, short enough
// that a wrong endpoint fails the step within a minute.
const DefaultRPCTimeout = time.Minute

// slowCallLogEvery is how often a call still waiting is logged.
const slowCallLogEvery = 10 * time.Second

// Endpoint is where s connects: EmulatorEndpoint, or ProductionEndpoint.
func (s Settings) Endpoint() string {
	if s.EmulatorEndpoint != "" {
		return s.EmulatorEndpoint
	}
	return ProductionEndpoint
}

// CallTimeout is RPCTimeout, or DefaultRPCTimeout if that is zero: what
// Call bounds one call by.
func (s Settings) CallTimeout() time.Duration {
	if s.RPCTimeout == 0 {
		return DefaultRPCTimeout
	}
	return s.RPCTimeout
}

// Call runs f, one RPC that api ("pubsubio.Read") makes on its own behalf,
// named by call ("GetSubscription projects/p/subscriptions/s"), under a
// deadline of RPCTimeout, or ctx's if that is sooner. While f has not
// returned, Call logs every 10 s (every quarter of the wait, if that is
// shorter) what it waits for. If the service never answered in time
// (DEADLINE_EXCEEDED or UNAVAILABLE), the error names the call, the
// endpoint and the limit; other errors are f's, for the caller to
// describe.
func (s Settings) Call(ctx context.Context, api, call string, f func(context.Context) error) error {
	start := time.Now()
	limit := fmt.Sprintf("Connection.RPCTimeout %v", s.CallTimeout())
	if d, ok := ctx.Deadline(); ok && d.Before(start.Add(s.CallTimeout())) {
		limit = fmt.Sprintf("the step's own %v", d.Sub(start).Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(ctx, s.CallTimeout())
	defer cancel()
	deadline, _ := ctx.Deadline()
	done, exited := make(chan struct{}), make(chan struct{})
	defer func() { close(done); <-exited }() // nothing is logged after Call returned
	go func() {
		defer close(exited)
		tick := time.NewTicker(max(min(slowCallLogEvery, deadline.Sub(start)/4), time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				log.Warnf(ctx, "%s: %s at %s has not answered after %v; the client retries until %s",
					api, call, s.Endpoint(), time.Since(start).Round(time.Millisecond), limit)
			}
		}
	}()
	err := f(ctx)
	if code, _ := grpccode.Of(err); err != nil && (code == codes.DeadlineExceeded || code == codes.Unavailable) {
		return fmt.Errorf("%s at %s got no answer within %s: check that the endpoint is right and reachable from the workers: %w",
			call, s.Endpoint(), limit, err)
	}
	return err
}
