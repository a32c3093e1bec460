package source

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/integration/monitoring"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/backlog"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics/metricstest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// newMonitoring starts a fake Cloud Monitoring and returns it with
// settings that reach it beside an emulator at emulator ("" for one that
// is never dialled).
func newMonitoring(t *testing.T, emulator string) (*monitoring.Server, connection.Settings) {
	t.Helper()
	srv, err := monitoring.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if emulator == "" {
		emulator = "127.0.0.1:1"
	}
	return srv, connection.Settings{EmulatorEndpoint: emulator, MonitoringEndpoint: srv.Addr}
}

// sampleAt is a sample of messages and bytes with its oldest message age
// old, all measured at at.
func sampleAt(at time.Time, messages, bytes int64, old time.Duration) backlog.Sample {
	return backlog.Sample{
		Messages:  backlog.Point{Value: messages, At: at},
		Bytes:     backlog.Point{Value: bytes, At: at},
		OldestAge: backlog.Point{Value: int64(old / time.Second), At: at},
	}
}

// logLines records what Beam's log is given while a test runs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Log(_ context.Context, _ log.Severity, _ int, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, msg)
}

// matching returns the lines containing sub.
func (l *logLines) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

func recordLog(t *testing.T) *logLines {
	l := &logLines{}
	log.SetLogger(l)
	t.Cleanup(func() { log.SetLogger(&log.Structural{}) })
	return l
}

func TestBacklogSamplingFollowsTheConnection(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want bool
	}{
		{"production", Config{Backlog: BacklogAuto}, true},
		{"an emulator alone", Config{Backlog: BacklogAuto, Connection: connection.Settings{EmulatorEndpoint: "localhost:8085"}}, false},
		{"an emulator with a Monitoring stand-in", Config{Backlog: BacklogAuto, Connection: connection.Settings{EmulatorEndpoint: "localhost:8085", MonitoringEndpoint: "localhost:8086"}}, true},
		{"off in production", Config{Backlog: BacklogOff}, false},
	}
	for _, c := range cases {
		if got := c.cfg.sampling(); got != c.want {
			t.Errorf("%s: sampling() = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestBacklogValidation(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want []string // nil: valid
	}{
		{"default", nil, nil},
		{"off", func(c *Config) { c.Backlog = BacklogOff }, nil},
		{"unknown", func(c *Config) { c.Backlog = "SOMETIMES" }, []string{`unknown Backlog "SOMETIMES"`, `"AUTO"`, `"OFF"`}},
		{"off with a Monitoring endpoint", func(c *Config) {
			c.Backlog = BacklogOff
			c.Connection = connection.Settings{EmulatorEndpoint: "localhost:8085", MonitoringEndpoint: "localhost:8086"}
		}, []string{`Connection.MonitoringEndpoint "localhost:8086" is set but Backlog is OFF`}},
	}
	for _, c := range cases {
		cfg := validConfig()
		if c.edit != nil {
			c.edit(&cfg)
		}
		_, _, err := cfg.withDefaults()
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want valid", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: valid, want an error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not contain %q", c.name, err, w)
			}
		}
	}
}

// Each watched subscription is asked for once per interval, however many
// splits watch it; one no longer watched is forgotten once it would be due,
// and one watched again before that waits for its interval.
func TestBacklogDueOncePerInterval(t *testing.T) {
	clock := newFakeClock()
	s := newBacklogSampler(connection.Settings{}, time.Minute, clock.now)
	a, b := model.SubscriptionOf("p", "a"), model.SubscriptionOf("p", "b")
	s.watch(a, clock.now())
	s.watch(a, clock.now())
	s.watch(b, clock.now())
	due, next := s.due()
	if len(due) != 2 || next != time.Minute {
		t.Fatalf("first round: due %v, next in %v; want both, next in a minute", due, next)
	}
	clock.advance(30 * time.Second)
	if due, next := s.due(); len(due) != 0 || next != 30*time.Second {
		t.Fatalf("half an interval later: due %v, next in %v; want none, next in 30s", due, next)
	}
	s.subs[b].users--       // b's only split goes,
	s.watch(b, clock.now()) // and another comes within the interval
	if due, _ := s.due(); len(due) != 0 {
		t.Fatalf("b watched again within its interval: due %v, want none", due)
	}
	s.subs[b].users--
	clock.advance(30 * time.Second)
	due, _ = s.due()
	if len(due) != 1 || due[0] != a {
		t.Fatalf("an interval later: due %v, want only a", due)
	}
	if _, ok := s.subs[b]; ok {
		t.Error("b, no longer watched, is still known after its interval")
	}
}

// What a round records: samples that came back, no sample for a
// subscription Monitoring has nothing of, and on failure the last samples
// kept, one log line, and a count per failure.
func TestBacklogSampleRecordsAnswers(t *testing.T) {
	logs := recordLog(t)
	srv, settings := newMonitoring(t, "")
	clock := newFakeClock()
	s := newBacklogSampler(settings, time.Minute, clock.now)
	a, quiet := model.SubscriptionOf("p", "a"), model.SubscriptionOf("p", "quiet")
	s.watch(a, clock.now())
	s.watch(quiet, clock.now())
	measured := clock.now().Add(-2 * time.Minute)
	srv.SetBacklog(a, measured, 40, 4000, 3*time.Minute)
	want := sampleAt(measured, 40, 4000, 3*time.Minute)
	samples, empty, failures := backlogSamples.Load(), backlogSamplesEmpty.Load(), backlogSampleFailures.Load()

	due, _ := s.due()
	client := s.sample(nil, due)
	if client == nil {
		t.Fatal("no client after a round that dialled")
	}
	defer client.Close()
	if got, ok := s.latest(a); !ok || got != want {
		t.Errorf("a: %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := s.latest(quiet); ok || !s.subs[quiet].done {
		t.Error("quiet: want no sample, and its first round done")
	}
	if d := backlogSamples.Load() - samples; d != 1 {
		t.Errorf("backlog_samples grew by %d, want 1", d)
	}
	if d := backlogSamplesEmpty.Load() - empty; d != 1 {
		t.Errorf("backlog_samples_empty grew by %d, want 1", d)
	}

	srv.Fail(status.Error(codes.Unavailable, "monitoring is down"))
	for range 3 {
		clock.advance(time.Minute)
		due, _ := s.due()
		if s.sample(client, due) != client {
			t.Fatal("a failed round dropped the client")
		}
	}
	if got, ok := s.latest(a); !ok || got != want {
		t.Errorf("after failures a is %+v, %v; want the last sample kept", got, ok)
	}
	if d := backlogSampleFailures.Load() - failures; d != 3 {
		t.Errorf("backlog_sample_failures grew by %d, want 3", d)
	}
	if lines := logs.matching("sampling the backlog"); len(lines) != 1 || !strings.Contains(lines[0], srv.Addr) || !strings.Contains(lines[0], "monitoring is down") {
		t.Errorf("logged %q, want one line naming the endpoint and the error", lines)
	}

	// Recovered, then failing again: logged again.
	srv.Fail(nil)
	clock.advance(time.Minute)
	due, _ = s.due()
	s.sample(client, due)
	srv.Fail(errors.New("again"))
	clock.advance(time.Minute)
	due, _ = s.due()
	s.sample(client, due)
	if n := len(logs.matching("sampling the backlog")); n != 2 {
		t.Errorf("%d log lines after a recovery and a new failure, want 2", n)
	}
}

// The process-wide sampler: the splits of a subscription share one sampler
// and one sample; it is asked for at once when first watched, and the last
// release stops the sampler.
func TestBacklogWatchSharesOneSampler(t *testing.T) {
	srv, settings := newMonitoring(t, "")
	cfg := testConfig(t, func(c *Config) { c.Connection = settings })
	sub := cfg.Subscriptions[0]
	srv.SetBacklog(sub, time.Now().Add(-time.Minute), 7, 700, time.Second)
	first := watchBacklog(cfg, sub, time.Now())
	second := watchBacklog(cfg, sub, time.Now())
	if first.s != second.s {
		t.Fatal("two splits of one subscription got two samplers")
	}
	awaitCondition(t, "the first sample", func() bool {
		_, ok := sampleOf(settings, sub)
		return ok
	})
	if got, _ := second.latest(); got.Messages.Value != 7 {
		t.Errorf("the second split sees %d messages, want 7", got.Messages.Value)
	}
	if n := len(srv.Requests()); n != len(backlog.Metrics) {
		t.Errorf("%d calls for one subscription watched twice, want %d", n, len(backlog.Metrics))
	}
	first.release()
	second.release()
	select {
	case <-first.s.stop:
	default:
		t.Error("the sampler still runs after its last split released it")
	}
	if _, ok := sampleOf(settings, sub); ok {
		t.Error("a released sampler still answers")
	}
}

// A Cloud Monitoring that does not answer holds nothing up: while the
// call is in flight the split's size, progress and gauges answer at once
// with one unit and no gauge; the call ends at RPCTimeout, unretried,
// counted and logged once.
func TestBacklogSlowMonitoringDoesNotHoldTheRead(t *testing.T) {
	logs := recordLog(t)
	srv, settings := newMonitoring(t, "")
	settings.RPCTimeout = 3 * time.Second
	srv.Delay(time.Hour)
	cfg := testConfig(t, func(c *Config) { c.Connection = settings })
	sub := cfg.Subscriptions[0]
	failures := backlogSampleFailures.Load()
	w := watchBacklog(cfg, sub, time.Now())
	defer w.release()
	awaitCondition(t, "the sampler's call", func() bool { return len(srv.Requests()) == 1 })

	fn := &readFn{SplitCount: 1, Cfg: cfg}
	split := Split{Subscription: sub}
	if got := fn.RestrictionSize(split, Restriction{}); got != 1 {
		t.Errorf("RestrictionSize while the call is in flight = %v, want 1", got)
	}
	rt := sdf.NewLockRTracker(newTracker(Restriction{}, processID))
	r := &splitReader{split: split, cfg: cfg, backlog: w}
	fn.trackBacklog(rt, r, split)
	if _, remaining := rt.GetProgress(); remaining != 1 {
		t.Errorf("remaining while the call is in flight = %v, want 1", remaining)
	}
	ctx := metricstest.BundleContext()
	r.reportBacklog(ctx)
	if got := gaugeValues(t, ctx); len(got) != 0 {
		t.Errorf("gauges while the call is in flight: %v, want none", got)
	}
	if d := backlogSampleFailures.Load() - failures; d != 0 {
		t.Fatalf("the call ended (%d failures) before the read's calls returned: they waited for it", d)
	}

	// The failure is counted, then logged: wait for both.
	awaitCondition(t, "the failure at RPCTimeout, counted and logged", func() bool {
		return backlogSampleFailures.Load()-failures == 1 && len(logs.matching("sampling the backlog")) > 0
	})
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d calls, want the one, not retried", n)
	}
	lines := logs.matching("sampling the backlog")
	// gRPC says "context deadline exceeded", or, when the deadline cuts
	// the stream first, code DeadlineExceeded with another description.
	if len(lines) != 1 || !strings.Contains(strings.ToLower(lines[0]), "deadline") {
		t.Errorf("logged %q, want one line with the deadline", lines)
	}
}
