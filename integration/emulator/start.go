package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/pubsubio/beam-pubsubio/integration/localport"
	"github.com/pubsubio/beam-pubsubio/integration/proc"
)

// Start launches a new emulator process from the gcloud emulator binary on a
// free loopback port that Restart can bind again (localport.Reserve), and
// waits (bounded by ctx, or 60 s if ctx has no deadline) until it answers
// ListTopics. It ignores PUBSUB_IT_EMULATOR and
// Docker: it is for callers that need an emulator of their own, e.g. to kill
// and Restart it. The caller must Stop it. A missing binary yields an error
// wrapping ErrUnavailable.
func Start(ctx context.Context) (*Emulator, error) {
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, readyTimeout)
	defer cancel()
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		ports, err := localport.Reserve(1)
		if err != nil {
			return nil, fmt.Errorf("emulator: %w", err)
		}
		endpoint := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		p, err := startProcess(ctx, bin, endpoint)
		if err == nil {
			return &Emulator{Endpoint: endpoint, Project: Project, Kind: KindProcess, proc: p, bin: bin}, nil
		}
		lastErr = err
		if !errors.Is(err, proc.ErrPortTaken) { // another process took the port: try another
			break
		}
	}
	return nil, fmt.Errorf("emulator: start %s: %w", bin, lastErr)
}
