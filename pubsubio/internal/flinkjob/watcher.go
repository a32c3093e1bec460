package flinkjob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// Defaults of Options.
const (
	DefaultPatience       = 10 * time.Minute
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultRequestTimeout = 10 * time.Second
)

// warnEvery is how often a watcher whose polls keep failing says so.
const warnEvery = time.Minute

// ErrNoAnswer is Err's error when the REST API has not answered a poll for
// longer than the patience.
var ErrNoAnswer = errors.New("no answer from Flink's REST API")

// ErrCheckpointingOff is Err's error when the JobManager answered that the
// job does not checkpoint: nothing the read emits is ever durable.
var ErrCheckpointingOff = errors.New("checkpointing is off")

// Options tune a Watcher; the first Watch of a JobManager and job sets
// them for the process.
type Options struct {
	// PollInterval is how often the watcher polls. If zero,
	// DefaultPollInterval (500 ms) is used: acks wait up to that much
	// longer than the checkpoint that covers them.
	PollInterval time.Duration
	// RequestTimeout bounds one request. If zero, DefaultRequestTimeout
	// (10 s) is used.
	RequestTimeout time.Duration
}

// Watcher follows one Flink job's checkpoints: it polls the REST API in
// the background while anyone uses it.
type Watcher struct {
	key    watchKey
	client client
	every  time.Duration

	users int           // under watchers' lock
	stop  chan struct{} // closed by the last Release

	mu          sync.Mutex
	subscribers map[int]func()
	nextSub     int
	polls       int64     // polls begun
	unresolved  []*mark   // marks no successful poll has resolved, oldest first
	lastSuccess time.Time // when it ended, on this process's clock
	lastErr     error     // the latest failed poll's error
	tried       string    // what the latest failed poll asked
	failed      int       // polls failed since the last success
	lastWarned  time.Time // when the failures were last logged
	// What the watcher knows of the job: its ID, whether it checkpoints
	// and finishes its bundles before, the restore its readings belong
	// to, and how far its checkpoints cover. epoch counts the job changes
	// and restores seen; marked says a stamp was made before the job was
	// first found.
	jobID           string
	configured      bool
	finishesBundles bool
	off             error
	restored        restore
	covers          int64 // trigger time (JobManager ms) of the latest checkpoint that counts
	epoch           int64
	marked          bool
}

// restore is the restore a job reports last: the checkpoint ID and when.
type restore struct{ id, at int64 }

type watchKey struct{ rest, job string }

var watchers = struct {
	sync.Mutex
	m map[watchKey]*Watcher
}{m: map[watchKey]*Watcher{}}

// Watch returns the process's watcher of the job whose Flink name starts
// with job+"-" at the REST address rest (host:port), started; the caller
// releases it.
func Watch(rest, job string, opts Options) *Watcher {
	watchers.Lock()
	defer watchers.Unlock()
	key := watchKey{rest, job}
	w := watchers.m[key]
	if w == nil {
		if opts.PollInterval <= 0 {
			opts.PollInterval = DefaultPollInterval
		}
		if opts.RequestTimeout <= 0 {
			opts.RequestTimeout = DefaultRequestTimeout
		}
		w = &Watcher{
			key:         key,
			client:      client{addr: rest, http: &http.Client{Timeout: opts.RequestTimeout}},
			every:       opts.PollInterval,
			stop:        make(chan struct{}),
			subscribers: map[int]func(){},
			lastSuccess: time.Now(),
		}
		watchers.m[key] = w
		go w.watch()
	}
	w.users++
	return w
}

// Release drops one user of w; the last stops it.
func (w *Watcher) Release() {
	watchers.Lock()
	defer watchers.Unlock()
	if w.users--; w.users == 0 {
		close(w.stop)
		delete(watchers.m, w.key)
	}
}

// Subscribe calls f, without the watcher's lock, after every poll that
// found a newly completed checkpoint. The returned function unsubscribes.
func (w *Watcher) Subscribe(f func()) (cancel func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextSub
	w.nextSub++
	w.subscribers[id] = f
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subscribers, id)
	}
}

// FinishesBundles reports whether the job, as its JobManager last
// answered, finishes every open bundle before a checkpoint's snapshot
// (Beam's finishBundleBeforeCheckpointing): a checkpoint triggered after
// a bundle began then holds all that bundle emitted.
func (w *Watcher) FinishesBundles() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.finishesBundles
}

// Err returns the error that stops acks for now: the job does not
// checkpoint, or no poll succeeded for patience. It names what was tried.
func (w *Watcher) Err(patience time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.off != nil {
		return w.off
	}
	if silent := time.Since(w.lastSuccess); silent > patience && w.lastErr != nil {
		return fmt.Errorf("%w: none of %d polls of the checkpoints of job %q at %s (Flink.REST, --pubsubio_flink_rest) succeeded in %v (FlinkCheckpoints.Patience %v); the last asked %s and got: %v",
			ErrNoAnswer, w.failed, w.key.job, w.key.rest, silent.Round(time.Second), patience, w.tried, w.lastErr)
	}
	return nil
}

// watch polls until the watcher is released: at once, then every interval.
func (w *Watcher) watch() {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		w.poll()
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
	}
}

// poll reads the job once and applies what it read; subscribers hear of
// a newly completed checkpoint.
func (w *Watcher) poll() {
	w.mu.Lock()
	w.polls++
	n, id, configured := w.polls, w.jobID, w.configured
	w.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := w.read(ctx, id, configured)
	r.n = n

	w.mu.Lock()
	var subs []func()
	if err != nil {
		pollFailures.Add(1)
		w.failed++
		if w.lastErr == nil || time.Since(w.lastWarned) >= warnEvery {
			log.Warnf(ctx, "pubsubio.Read: %d polls of Flink's REST API at %s about job %q failed in %v; acks wait for an answer: %v",
				w.failed, w.key.rest, w.key.job, time.Since(w.lastSuccess).Round(time.Second), err)
			w.lastWarned = time.Now()
		}
		w.lastErr, w.tried = err, r.tried
	} else {
		if w.lastErr != nil {
			log.Infof(ctx, "pubsubio.Read: Flink's REST API at %s answers again, after %d failed polls", w.key.rest, w.failed)
		}
		w.lastErr, w.lastSuccess, w.failed = nil, time.Now(), 0
		if r.configured && r.finishesBundles != nil {
			after := "the next bundle began (the job does not set finishBundleBeforeCheckpointing)"
			if *r.finishesBundles {
				after = "the bundle began (the job finishes bundles before checkpoints)"
			}
			log.Infof(ctx, "pubsubio.Read: the Flink job %s (%q) checkpoints; what a bundle emitted is acked once a checkpoint triggered after %s completes", r.jobID, w.key.job, after)
		}
		if w.apply(r) {
			for _, f := range w.subscribers {
				subs = append(subs, f)
			}
		}
	}
	w.mu.Unlock()
	for _, f := range subs {
		f()
	}
}
