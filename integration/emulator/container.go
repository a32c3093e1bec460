package emulator

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpubsub "github.com/testcontainers/testcontainers-go/modules/gcloud/pubsub"
)

// ContainerImage is the image the Docker fallback runs.
const ContainerImage = "gcr.io/google.com/cloudsdktool/cloud-sdk:emulators"

// startContainer runs the emulator with testcontainers-go. It is the last
// resort, used only when no emulator binary is found.
//
// Honesty note: the machine this package was written on has the docker CLI
// but no Docker engine, so this path is compiled and its "Docker not
// reachable" branch exercised, but a container has never actually been
// started by it. If it misbehaves, prefer PUBSUB_IT_EMULATOR or installing
// the emulator binary.
func startContainer(ctx context.Context) (*Emulator, error) {
	if err := dockerReachable(ctx); err != nil {
		return nil, fmt.Errorf("%w: docker engine not reachable: %v", ErrUnavailable, err)
	}
	c, err := tcpubsub.Run(ctx, ContainerImage, tcpubsub.WithProjectID(Project))
	if err != nil {
		if termErr := testcontainers.TerminateContainer(c); termErr != nil {
			err = fmt.Errorf("%w (and terminating it: %v)", err, termErr)
		}
		return nil, fmt.Errorf("start emulator container %s: %w; pull the image by hand to see why, or set %s", ContainerImage, err, EnvEndpoint)
	}
	e := &Emulator{Endpoint: c.URI(), Project: Project, Kind: KindContainer,
		stopFn: func() error { return testcontainers.TerminateContainer(c) }}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := waitReady(rctx, e.Endpoint, e.Project, nil, nil); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("emulator container: %w", err)
	}
	return e, nil
}

// dockerReachable asks the Docker engine for its info, bounded. The
// testcontainers client constructor can panic on odd configurations; that is
// turned into an error too.
func dockerReachable(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers panicked probing docker: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	// The constructor may fall back to a client from the environment without
	// a successful round trip; make one.
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return err
	}
	return nil
}
