package integration

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/pubsubio/beam-pubsubio/integration/sample"
)

// Prism 2.77 keeps a job running after its LOOPBACK worker disconnected
// (a test cancelled the job's context, or gave up on it). When it takes
// the disconnect for "an additional bundle response" of a bundle that is
// still open, that bundle's stage waits for a response that never comes in
// a busy loop (stage.Execute: its data channel is closed, so its select
// never blocks): in a CI run two such stages kept both of this machine's
// cores busy for the rest of the test binary. disconnectReaper watches
// Prism's log in this process and cancels every job whose worker it saw
// disconnect, which ends its stages.
type disconnectReaper struct {
	slog.Handler
	cancelled *sync.Map // the disconnects acted on so far
}

// disconnectedJob finds the job ID and name of a worker in Prism's message.
var disconnectedJob = regexp.MustCompile(`SDK worker disconnected: worker\[(job-\d+)\[([^\]]+)\]`)

// reapDisconnectedJobs installs the reaper in front of the default logger,
// which the in-process Prism logs to.
func reapDisconnectedJobs() {
	slog.SetDefault(slog.New(disconnectReaper{Handler: slog.Default().Handler(), cancelled: &sync.Map{}}))
}

func (r disconnectReaper) Handle(ctx context.Context, rec slog.Record) error {
	var text strings.Builder
	text.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		text.WriteString(" " + a.Value.String())
		return true
	})
	if m := disconnectedJob.FindStringSubmatch(text.String()); m != nil {
		if _, done := r.cancelled.LoadOrStore(m[0], true); !done {
			go cancelJob(m[1], m[2])
		}
	}
	return r.Handler.Handle(ctx, rec)
}

func (r disconnectReaper) WithAttrs(attrs []slog.Attr) slog.Handler {
	return disconnectReaper{Handler: r.Handler.WithAttrs(attrs), cancelled: r.cancelled}
}

func (r disconnectReaper) WithGroup(name string) slog.Handler {
	return disconnectReaper{Handler: r.Handler.WithGroup(name), cancelled: r.cancelled}
}

// cancelJob cancels the job id named name on the in-process Prism, if it
// still runs there.
func cancelJob(id, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := sample.ConnectJobs()
	if err != nil {
		return
	}
	defer func() { _ = jobs.Close() }()
	if ok, _ := jobs.Cancel(ctx, id, name); ok {
		log.Infof(ctx, "integration: cancelled Prism job %s (%s), whose LOOPBACK worker disconnected", id, name)
	}
}
