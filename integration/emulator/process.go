package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/pubsubio/beam-pubsubio/integration/proc"
)

// process is a running cloud-pubsub-emulator, leader of its own process
// group.
type process struct {
	*proc.Process
	dir string // temp dir: working dir, java.io.tmpdir, log file
}

// startProcess runs bin serving endpoint and waits until it answers. On any
// failure the process is killed, its temp dir removed, and the error carries
// the emulator's output.
func startProcess(ctx context.Context, bin, endpoint string) (*process, error) {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return nil, fmt.Errorf("bad endpoint %q: %w", endpoint, err)
	}
	dir, err := os.MkdirTemp("", "pubsub-emulator-")
	if err != nil {
		return nil, fmt.Errorf("create emulator temp dir: %w", err)
	}
	// Keep any JVM scratch files inside dir so stop's RemoveAll gets them.
	opts := strings.TrimSpace(os.Getenv("CLOUD_PUBSUB_EMULATOR_OPTS") + " -Djava.io.tmpdir=" + dir)
	env := append(os.Environ(), "CLOUD_PUBSUB_EMULATOR_OPTS="+opts)
	started, err := proc.Start("emulator", bin, []string{"--host=" + host, "--port=" + port}, dir, filepath.Join(dir, "emulator.log"), env)
	if err != nil {
		_ = os.RemoveAll(dir)
		if errors.Is(err, proc.ErrNoUnix) {
			err = fmt.Errorf("%w; set %s=host:port instead", err, EnvEndpoint)
		}
		return nil, err
	}
	p := &process{Process: started, dir: dir}
	bindFailed := func() error {
		if proc.PortTaken(p.Output(64 << 10)) {
			return proc.ErrPortTaken
		}
		return nil
	}
	if err := waitReady(ctx, endpoint, Project, p.Exited(), bindFailed); err != nil {
		out := p.Output(8 << 10)
		if stopErr := p.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		if proc.PortTaken(out) && !errors.Is(err, proc.ErrPortTaken) {
			err = fmt.Errorf("%w: %w", proc.ErrPortTaken, err)
		}
		return nil, fmt.Errorf("%w\n--- emulator output (pid %d) ---\n%s--- end of emulator output ---", err, p.PID, out)
	}
	return p, nil
}

// stop kills the whole process group with SIGKILL (the emulator keeps state
// in memory only, so there is nothing to shut down gracefully), waits for
// it to be gone, and removes the temp dir.
func (p *process) stop() error {
	err := p.Kill()
	if rmErr := os.RemoveAll(p.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove emulator temp dir: %w", rmErr))
	}
	return err
}
