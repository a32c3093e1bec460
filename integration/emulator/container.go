package emulator

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// ContainerImage is the image the Docker fallback runs unless
// PUBSUB_IT_IMAGE names another. It is built on this machine, from the
// installed emulator and JDK, by scripts/emulator-image.sh (no registry
// involved): a jlink'ed Java runtime and the emulator's jar, whose
// entrypoint serves on 0.0.0.0:8085.
const ContainerImage = "pubsubio/pubsub-emulator:local"

// EnvImage overrides ContainerImage. The image must start the emulator on
// 0.0.0.0:8085 by itself and log "Server started, listening on 8085", as
// the emulator's own main class does.
const EnvImage = "PUBSUB_IT_IMAGE"

const (
	containerPort = "8085/tcp"
	// containerReadyLog is what the emulator prints once its gRPC server
	// listens; the port check alone is not enough, Docker's proxy accepts
	// connections before the JVM does.
	containerReadyLog = "Server started, listening on 8085"
	// containerLabel marks our containers, so a crashed test binary's
	// leftovers can be found: docker ps -a --filter label=pubsubio.emulator.
	containerLabel = "pubsubio.emulator"
)

// containerImage is the image to run: PUBSUB_IT_IMAGE or ContainerImage.
func containerImage() string {
	if img := strings.TrimSpace(os.Getenv(EnvImage)); img != "" {
		return img
	}
	return ContainerImage
}

// startContainer runs the emulator image with testcontainers-go. acquire
// uses it as the last resort, when no emulator binary is found; the
// container test calls it directly.
//
// No image is ever pulled: a missing image is ErrUnavailable naming
// scripts/emulator-image.sh. Ryuk, testcontainers' reaper, is itself an
// image to pull, so it is disabled (TESTCONTAINERS_RYUK_DISABLED=true,
// unless the environment says otherwise) and the container is removed by
// Stop; one left by a killed test binary carries the pubsubio.emulator
// label.
func startContainer(ctx context.Context) (*Emulator, error) {
	disableRyuk()
	img := containerImage()
	if err := imagePresent(ctx, img); err != nil {
		return nil, err
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        img,
			ExposedPorts: []string{containerPort},
			Labels:       map[string]string{containerLabel: "1"},
			WaitingFor: wait.ForAll(
				wait.ForLog(containerReadyLog),
				// Only the mapping: the image has no shell for the internal
				// check, and waitReady below makes the external one with a
				// real RPC on the host containerEndpoint picks.
				wait.ForListeningPort(containerPort).SkipInternalCheck().SkipExternalCheck(),
			).WithDeadline(readyTimeout),
		},
		Started: true,
	})
	if err != nil {
		logs := containerLogs(c)
		if termErr := testcontainers.TerminateContainer(c); termErr != nil {
			err = fmt.Errorf("%w (and terminating it: %v)", err, termErr)
		}
		return nil, fmt.Errorf("start emulator container %s: %w%s", img, err, logs)
	}
	endpoint, err := containerEndpoint(ctx, c)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("emulator container %s: %w", img, err)
	}
	e := &Emulator{Endpoint: endpoint, Project: Project, Kind: KindContainer,
		stopFn: func() error { return testcontainers.TerminateContainer(c) }}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := waitReady(rctx, e.Endpoint, e.Project, nil, nil); err != nil {
		logs := containerLogs(c)
		_ = e.Stop()
		return nil, fmt.Errorf("emulator container %s: %w%s", img, err, logs)
	}
	return e, nil
}

// containerEndpoint is host:port of the container's published 8085.
//
// The host is testcontainers' choice, except when the engine's default
// bridge gateway is an address of this machine: then the engine runs in
// this network namespace and publishes on loopback. testcontainers decides
// "I run in a container" from /.dockerenv alone and then dials the default
// gateway, which on a VM built from a container image (this project's
// machines) leads nowhere. TESTCONTAINERS_HOST_OVERRIDE still wins.
func containerEndpoint(ctx context.Context, c testcontainers.Container) (string, error) {
	port, err := c.MappedPort(ctx, containerPort)
	if err != nil {
		return "", fmt.Errorf("mapped port: %w", err)
	}
	host := ""
	if _, set := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); !set && engineInThisNetns(ctx) {
		host = "127.0.0.1"
	} else if host, err = c.Host(ctx); err != nil {
		return "", fmt.Errorf("docker host: %w", err)
	}
	return net.JoinHostPort(host, port.Port()), nil
}

// engineInThisNetns reports whether the gateway of the engine's "bridge"
// network is an address of one of this machine's interfaces (true where
// the engine runs beside us; false inside a container on that bridge,
// whose address is another one of the subnet).
func engineInThisNetns(ctx context.Context) bool {
	cli, err := dockerClient(ctx)
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := cli.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	if err != nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, cfg := range res.Network.IPAM.Config {
		gw := cfg.Gateway
		if !gw.IsValid() && cfg.Subnet.IsValid() {
			// Older engines leave the default bridge's gateway out; the
			// engine gives it the subnet's first address.
			gw = cfg.Subnet.Masked().Addr().Next()
		}
		if !gw.IsValid() {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(net.IP(gw.AsSlice())) {
				return true
			}
		}
	}
	return false
}

// disableRyuk turns off testcontainers' reaper unless the environment set
// TESTCONTAINERS_RYUK_DISABLED. testcontainers reads its configuration once
// per process, so this runs before any other testcontainers call.
func disableRyuk() {
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

// imagePresent checks that the engine answers and has img locally. Either
// failing is ErrUnavailable: this machine cannot run the container.
func imagePresent(ctx context.Context, img string) (err error) {
	cli, err := dockerClient(ctx)
	if err != nil {
		return fmt.Errorf("%w: docker engine not reachable (as root: apt-get install docker.io; dockerd --storage-driver=vfs &): %v", ErrUnavailable, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, img); err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("%w: docker has no image %s; build it with scripts/emulator-image.sh (or set %s)", ErrUnavailable, img, EnvImage)
		}
		return fmt.Errorf("%w: docker image inspect %s: %v", ErrUnavailable, img, err)
	}
	return nil
}

// containerLogs returns the tail of a failed container's output, for the
// error message, or "".
func containerLogs(c testcontainers.Container) string {
	if c == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Logs(ctx)
	if err != nil {
		return ""
	}
	defer r.Close()
	buf := make([]byte, 16<<10)
	n, _ := io.ReadFull(r, buf)
	if n == 0 {
		return ""
	}
	return "\n--- container output (head) ---\n" + string(buf[:n]) + "\n--- end of container output ---"
}

// dockerClient returns a client whose engine answered a ping within 5 s.
// The testcontainers client constructor can panic on odd configurations;
// that is turned into an error too.
func dockerClient(ctx context.Context) (cli *testcontainers.DockerClient, err error) {
	defer func() {
		if r := recover(); r != nil {
			cli, err = nil, fmt.Errorf("testcontainers panicked probing docker: %v", r)
		}
	}()
	disableRyuk()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cli, err = testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, err
	}
	// The constructor may fall back to a client from the environment without
	// a successful round trip; make one.
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}
