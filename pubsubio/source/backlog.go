package source

import (
	"context"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/backlog"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The backlog signal. Pub/Sub's data plane shows no backlog; Cloud
// Monitoring does, per subscription, measured every 60 s and visible a
// minute or few later (internal/backlog). A process-wide sampler per
// Monitoring connection asks for the subscriptions its split readers
// read, once a minute each, in the background: a split reader watches its
// subscription while it lives and releases it with itself, as commit.go's
// checkpoint watchers do. A sample that cannot be had is counted and
// logged once, and the read goes on without it. What the samples feed:
// the splits' progress and size, and the backlog gauges
// (backlogprogress.go), and the watermark (backlogwatermark.go).

// backlogInterval is how often a subscription is sampled: the service
// measures its backlog every 60 s, so asking more often learns nothing.
const backlogInterval = time.Minute

// sampling reports whether the read samples backlog.
func (cfg Config) sampling() bool {
	return cfg.Backlog != BacklogOff && cfg.Connection.Monitors()
}

// backlogKey identifies a Monitoring connection: samplers are shared by
// every read of the process that connects the same way.
type backlogKey struct {
	target, credentials string
	timeout             time.Duration
}

// subBacklog is what the sampler knows of one subscription.
type subBacklog struct {
	users   int            // split readers watching it
	watched time.Time      // when it was first watched
	asked   time.Time      // when it was last asked for (zero: never)
	done    bool           // an answer, or a failure, came back since it was first watched
	sample  backlog.Sample // the latest sample; unknown when Monitoring had none
	hold    backlogHold    // the watermark's hold on its oldest message (backlogwatermark.go)
}

// backlogSampler samples the backlog of the watched subscriptions through
// one Monitoring connection, in the background.
type backlogSampler struct {
	key      backlogKey
	settings connection.Settings
	interval time.Duration
	now      func() time.Time

	users int           // split readers using it (under samplers' lock)
	stop  chan struct{} // closed when the last one is released
	wake  chan struct{} // a subscription was watched for the first time

	mu      sync.Mutex
	subs    map[model.Subscription]*subBacklog
	failing bool // the failure logged; reset by a sample that succeeds
}

// samplers are the process's backlog samplers.
var samplers = struct {
	sync.Mutex
	m map[backlogKey]*backlogSampler
}{m: map[backlogKey]*backlogSampler{}}

func backlogKeyOf(s connection.Settings) backlogKey {
	return backlogKey{target: s.MonitoringTarget(), credentials: s.CredentialsFile, timeout: s.CallTimeout()}
}

// backlogWatch is one split reader's interest in its subscription's
// backlog; release it with the reader.
type backlogWatch struct {
	s      *backlogSampler
	sub    model.Subscription
	gauges backlogGauges
}

// watchBacklog returns the split's watch of sub's backlog under cfg, from
// at on, nil when the read does not sample.
func watchBacklog(cfg Config, sub model.Subscription, at time.Time) *backlogWatch {
	if !cfg.sampling() {
		return nil
	}
	samplers.Lock()
	key := backlogKeyOf(cfg.Connection)
	s := samplers.m[key]
	if s == nil {
		s = newBacklogSampler(cfg.Connection, backlogInterval, time.Now)
		samplers.m[key] = s
		go s.run()
	}
	s.users++
	samplers.Unlock()
	s.watch(sub, at)
	return &backlogWatch{s: s, sub: sub, gauges: backlogGaugesOf(sub)}
}

func newBacklogSampler(settings connection.Settings, interval time.Duration, now func() time.Time) *backlogSampler {
	return &backlogSampler{
		key: backlogKeyOf(settings), settings: settings, interval: interval, now: now,
		stop: make(chan struct{}), wake: make(chan struct{}, 1),
		subs: map[model.Subscription]*subBacklog{},
	}
}

// watch adds a user of sub from at on, waking the loop to sample it if it
// is new.
func (s *backlogSampler) watch(sub model.Subscription, at time.Time) {
	s.mu.Lock()
	e := s.subs[sub]
	if e == nil {
		e = &subBacklog{watched: at}
		s.subs[sub] = e
	}
	e.users++
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// release drops the split's interest; the sampler's last user stops it.
func (w *backlogWatch) release() {
	w.s.mu.Lock()
	if e := w.s.subs[w.sub]; e != nil {
		e.users--
	}
	w.s.mu.Unlock()
	samplers.Lock()
	defer samplers.Unlock()
	if w.s.users--; w.s.users == 0 {
		close(w.s.stop)
		if samplers.m[w.s.key] == w.s {
			delete(samplers.m, w.s.key)
		}
	}
}

// sampleOf returns the latest sample of sub through the process's sampler
// for settings, without watching it (RestrictionSize runs where no split
// may have started).
func sampleOf(settings connection.Settings, sub model.Subscription) (backlog.Sample, bool) {
	samplers.Lock()
	s := samplers.m[backlogKeyOf(settings)]
	samplers.Unlock()
	if s == nil {
		return backlog.Sample{}, false
	}
	return s.latest(sub)
}

// latest returns the watched subscription's latest sample, if known.
func (w *backlogWatch) latest() (backlog.Sample, bool) { return w.s.latest(w.sub) }

func (s *backlogSampler) latest(sub model.Subscription) (backlog.Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.subs[sub]; e != nil && e.sample.Known() {
		return e.sample, true
	}
	return backlog.Sample{}, false
}

// run samples what is due until the sampler is stopped.
func (s *backlogSampler) run() {
	var client *backlog.Client
	defer func() {
		if client != nil {
			client.Close()
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-timer.C:
		}
		due, next := s.due()
		if len(due) > 0 {
			client = s.sample(client, due)
		}
		timer.Reset(next)
	}
}

// due marks as asked, and returns, the watched subscriptions not asked for
// within the interval, and how long until the next is due. Subscriptions
// no longer watched are forgotten once they would be due again, so one
// watched anew at once is not asked twice within an interval.
func (s *backlogSampler) due() ([]model.Subscription, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	next := s.interval
	var due []model.Subscription
	for sub, e := range s.subs {
		wait := s.interval - now.Sub(e.asked)
		switch {
		case e.users <= 0 && wait <= 0:
			delete(s.subs, sub)
		case e.users <= 0:
		case e.asked.IsZero() || wait <= 0:
			e.asked = now
			due = append(due, sub)
		default:
			next = min(next, wait)
		}
	}
	return due, next
}

// sample asks for due through client, dialling it first if it is nil, and
// records the answers; it returns the client for the next round.
func (s *backlogSampler) sample(client *backlog.Client, due []model.Subscription) *backlog.Client {
	ctx := context.Background()
	var err error
	if client == nil {
		client, err = backlog.NewClient(ctx, s.settings)
	}
	got := map[model.Subscription]backlog.Sample{}
	if err == nil {
		got, err = client.Sample(ctx, due, s.now())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range due {
		e := s.subs[sub]
		if e == nil {
			continue
		}
		e.done = true
		if sample, ok := got[sub]; ok {
			e.sample = sample
			backlogSamples.Add(1)
		} else if err == nil {
			// Monitoring has no point of it within the lookback: what it
			// showed before no longer holds.
			e.sample = backlog.Sample{}
			backlogSamplesEmpty.Add(1)
		}
	}
	if err != nil {
		backlogSampleFailures.Add(1)
		if !s.failing {
			s.failing = true
			log.Warnf(ctx, "pubsubio.Read: sampling the backlog of %d subscriptions from Cloud Monitoring at %s failed; the read goes on, its progress, backlog gauges and watermark keep the last samples until one succeeds (logged once; backlog_sample_failures counts each failure): %v",
				len(due), s.key.target, err)
		}
	} else {
		s.failing = false
	}
	return client
}
