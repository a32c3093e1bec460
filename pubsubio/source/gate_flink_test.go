package source

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob/flinkjobtest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics/metricstest"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// flinkReader is a split reader whose acks wait for jm's checkpoints of
// the job named name, with its clock offset from the real one by skew.
func flinkReader(t *testing.T, jm *flinkjobtest.JobManager, name string, skew time.Duration) *readerHarness {
	cfg := testConfig(t, func(c *Config) {
		c.Commit = CommitFlinkCheckpoint
		c.Flink = FlinkCheckpoints{REST: jm.Addr(), Job: strings.SplitN(name, "-", 2)[0]}
	})
	h := newReaderHarness(t, cfg)
	h.r.now = func() time.Time { return time.Now().Add(skew) }
	return h
}

// begin begins bundle seq of h's split, which acks what the bundles before
// it emitted as far as a checkpoint covers them, and emits up to n
// buffered messages; it returns their ack IDs.
func begin(t *testing.T, h *readerHarness, seq int64, acks []string, n int) []string {
	t.Helper()
	out, err := h.r.beginBundle(metricstest.BundleContext(), Restriction{Seq: seq, Owner: processID, AckIDs: acks}, n)
	if err != nil {
		t.Fatalf("bundle %d: %v", seq, err)
	}
	h.r.endBundle(nil, h.r.cfg.watermarkPolicy())
	return ackIDsOf(out)
}

func checkHandles(t *testing.T, what string, hs []*fakeHandle, acks, nacks int32) {
	t.Helper()
	for i, hd := range hs {
		hd.check(t, fmt.Sprintf("%s, message %d", what, i), acks, nacks)
	}
}

// A worker whose clock runs 3 s behind the JobManager's acks nothing that
// a checkpoint triggered before the next bundle began "covers": coverage
// is decided on the JobManager's clock alone.
func TestFlinkGateWorkerClockBehind(t *testing.T) {
	jm := flinkjobtest.New(t, "skewbehind-root-1-a")
	h := flinkReader(t, jm, "skewbehind-root-1-a", -3*time.Second)
	run := h.poll()
	hs := deliverN(h.r, run, "m", 3)
	first := begin(t, h, 0, nil, 3)

	jm.Checkpoint("skewbehind-root-1-a") // triggered before bundle 1 begins
	jm.AwaitAnswers(t, 2)
	begin(t, h, 1, first, 3)
	jm.AwaitAnswers(t, 2)
	begin(t, h, 2, nil, 3)
	checkHandles(t, "a checkpoint triggered before the next bundle began completed", hs, 0, 0)

	jm.Checkpoint("skewbehind-root-1-a") // triggered after bundle 1 began
	jm.AwaitAnswers(t, 2)
	begin(t, h, 3, nil, 3)
	checkHandles(t, "a checkpoint triggered after the next bundle began completed", hs, 1, 0)
}

// A worker whose clock runs 3 s ahead acks as soon as a covering
// checkpoint completed, not 3 s later.
func TestFlinkGateWorkerClockAhead(t *testing.T) {
	jm := flinkjobtest.New(t, "skewahead-root-1-a")
	h := flinkReader(t, jm, "skewahead-root-1-a", 3*time.Second)
	run := h.poll()
	hs := deliverN(h.r, run, "m", 3)
	first := begin(t, h, 0, nil, 3)
	begin(t, h, 1, first, 3)
	jm.AwaitAnswers(t, 2) // the read has read the JobManager's clock since
	jm.Checkpoint("skewahead-root-1-a")
	jm.AwaitAnswers(t, 2)
	begin(t, h, 2, nil, 3)
	checkHandles(t, "a checkpoint triggered after the next bundle began completed", hs, 1, 0)
}

// A job that finishes its bundles before checkpoints
// (finishBundleBeforeCheckpointing, as the JobManager shows its options)
// has what a bundle emitted acked by the first checkpoint triggered after
// that bundle began, a checkpoint interval sooner; one triggered before it
// began still covers nothing of it.
func TestFlinkGateBundlesFinishedBeforeCheckpoints(t *testing.T) {
	const name = "finishing-root-1-a"
	jm := flinkjobtest.New(t, name)
	jm.FinishBundles(name)
	h := flinkReader(t, jm, name, -3*time.Second)
	run := h.poll()
	hs := deliverN(h.r, run, "m", 6)
	jm.AwaitAnswers(t, 2)
	jm.Checkpoint(name) // triggered before bundle 0 began
	jm.AwaitAnswers(t, 2)
	first := begin(t, h, 0, nil, 3)
	second := begin(t, h, 1, first, 3)
	jm.AwaitAnswers(t, 2)
	begin(t, h, 2, second, 0)
	checkHandles(t, "bundle 0's, after a checkpoint triggered before it began", hs[:3], 0, 0)

	jm.Checkpoint(name) // triggered after bundle 1 began, before bundle 3
	jm.AwaitAnswers(t, 2)
	checkHandles(t, "bundle 0's, after a checkpoint triggered after it began", hs[:3], 1, 0)
	checkHandles(t, "bundle 1's, after a checkpoint triggered after it began", hs[3:], 1, 0)
}

// Flink restored the job, in the same worker process, from a checkpoint
// holding bundle 1's restriction: what bundle 0 emitted is durable, what
// bundles 1 and 2 emitted was rolled back. A checkpoint that completes
// after the restore, before the retried bundle 1 runs, must not ack what
// the restore rolled back: it goes back into the buffer, and the retry
// emits it again.
func TestFlinkGateRestoreInTheSameProcess(t *testing.T) {
	jm := flinkjobtest.New(t, "restore-root-1-a")
	h := flinkReader(t, jm, "restore-root-1-a", 0)
	run := h.poll()
	hs := deliverN(h.r, run, "m", 6)
	b0 := begin(t, h, 0, nil, 2)
	jm.AwaitAnswers(t, 1)
	b1 := begin(t, h, 1, b0, 2)
	restoredFrom := jm.Checkpoint("restore-root-1-a") // holds bundle 1's restriction
	jm.AwaitAnswers(t, 1)
	b2 := begin(t, h, 2, b1, 2)
	begin(t, h, 3, b2, 0) // the failure comes while bundle 3 runs

	jm.Restore("restore-root-1-a", restoredFrom)
	jm.AwaitAnswers(t, 2)
	jm.Checkpoint("restore-root-1-a") // completes before the retried bundle runs
	jm.AwaitAnswers(t, 2)
	retried := begin(t, h, 1, b0, 10)

	checkHandles(t, "bundle 0's, durable in the restored checkpoint", hs[:2], 1, 0)
	checkHandles(t, "bundles 1 and 2's, rolled back by the restore", hs[2:], 0, 0)
	if got, want := sorted(retried), sorted(append(b1, b2...)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the retried bundle emitted %v, want what the restore rolled back, %v", got, want)
	}
}

// Flink finalizes every bundle finished so far when a checkpoint
// completes, including bundles that ended after its barrier. Under
// CommitFlinkCheckpoint a finalization callback acks only what a covering
// checkpoint cleared.
func TestFlinkGateFinalizationAcksOnlyWhatTheGateCleared(t *testing.T) {
	jm := flinkjobtest.New(t, "finalizing0job-root-1-a")
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "finalizing", 1)
	ids := f.publish(t, topic, 5, nil)
	cfg := testConfig(t, func(c *Config) {
		c.Subscriptions = subs
		c.Connection = f.conn
		c.Commit = CommitFlinkCheckpoint
		c.Flink = FlinkCheckpoints{REST: jm.Addr(), Job: "finalizing_job"}
		c.Finalization = FinalizationOn
	})
	fn := &finalizingReadFn{readFn: readFn{ReadID: "finalizing-gate", SplitCount: 1, Cfg: cfg}}
	fn.Setup()
	defer fn.Teardown()
	bf := &finalizer{}
	split := Split{Index: 0, Subscription: subs[0]}
	rest := Restriction{}
	var emitted []string
	deadline := time.Now().Add(waitLimit)
	for len(emitted) < len(ids) && time.Now().Before(deadline) {
		fn.StartBundle(context.Background(), nil, nil)
		rt := sdf.NewLockRTracker(newTracker(rest, processID))
		emit := func(_ beam.EventTime, m model.Message) { emitted = append(emitted, m.ID) }
		dead := func(beam.EventTime, dlq.FailedMessage) {}
		if _, err := fn.ProcessElement(metricstest.BundleContext(), fn.CreateWatermarkEstimator(0), bf, rt, split, emit, dead); err != nil {
			t.Fatal(err)
		}
		_, res, _ := rt.TrySplit(0)
		rest = res.(Restriction)
		// The bundle ended; a checkpoint triggered before it completes and
		// Flink finalizes every bundle finished so far.
		bf.finalize(t)
	}
	if len(emitted) < len(ids) {
		t.Fatalf("emitted %d of %d messages within %v", len(emitted), len(ids), waitLimit)
	}
	if n := fn.rs.stats.get(messagesAcked); n != 0 {
		t.Errorf("finalization acked %d messages that no checkpoint covers", n)
	}
}

// finalizer is the BundleFinalization of a harness that delivers
// callbacks: finalize runs what the bundle registered.
type finalizer struct{ callbacks []func() error }

func (f *finalizer) RegisterCallback(_ time.Duration, cb func() error) {
	f.callbacks = append(f.callbacks, cb)
}

func (f *finalizer) finalize(t *testing.T) {
	t.Helper()
	for _, cb := range f.callbacks {
		if err := cb(); err != nil {
			t.Errorf("callback failed: %v", err)
		}
	}
	f.callbacks = nil
}

// A JobManager whose REST API answers 503 for a while (leader election, a
// slow start) delays acks and fails nothing; once it answers, the covered
// messages are acked.
func TestFlinkGateRESTUnavailableDelaysAcks(t *testing.T) {
	jm := flinkjobtest.New(t, "unavailable-root-1-a")
	// As a JobManager answers during leader election: the job is listed,
	// nothing about it answers.
	jm.SetFault(func(path string) int {
		if path == "/jobs/overview" {
			return 0
		}
		return http.StatusServiceUnavailable
	})
	h := flinkReader(t, jm, "unavailable-root-1-a", 0)
	run := h.poll()
	hs := deliverN(h.r, run, "m", 3)
	b0 := begin(t, h, 0, nil, 3)
	begin(t, h, 1, b0, 3)
	for seq := int64(2); seq < 6; seq++ {
		jm.AwaitFaults(t, 2)
		begin(t, h, seq, nil, 3) // fails nothing
	}
	jm.SetFault(nil)
	jm.AwaitAnswers(t, 2)
	jm.Checkpoint("unavailable-root-1-a")
	jm.AwaitAnswers(t, 2)
	begin(t, h, 6, nil, 3)
	checkHandles(t, "once the REST API answers again and a checkpoint covers them", hs, 1, 0)
}

// A JobManager restarted without HA runs the job under a new ID: the read
// looks the job up again. What waited from before it saw the new ID may
// have been rolled back and is given back; what the new job's checkpoints
// cover is acked.
func TestFlinkGateJobLookedUpAgain(t *testing.T) {
	jm := flinkjobtest.New(t, "relookup-root-1-a")
	h := flinkReader(t, jm, "relookup-root-1-a", 0)
	run := h.poll()
	before := deliverN(h.r, run, "m", 3)
	b0 := begin(t, h, 0, nil, 3)
	begin(t, h, 1, b0, 0)
	jm.AwaitAnswers(t, 1)

	jm.SetJob("relookup-root-1-a", "job-after-restart", "", 0)
	jm.AwaitAnswers(t, 2) // only the job under its new ID answers
	after := deliverN(h.r, run, "n", 3)
	b2 := begin(t, h, 2, nil, 3)
	begin(t, h, 3, b2, 0)
	jm.AwaitAnswers(t, 2)
	jm.Checkpoint("relookup-root-1-a")
	jm.AwaitAnswers(t, 2)
	begin(t, h, 4, nil, 0)
	checkHandles(t, "waiting since before the job's new ID was seen", before, 0, 1)
	checkHandles(t, "covered by a checkpoint of the job under its new ID", after, 1, 0)
}

// A job that does not checkpoint never makes output durable: once its
// JobManager answers so, the read fails, saying what to do, instead of
// holding every message until its lease ends.
func TestFlinkGateCheckpointingOffFailsTheRead(t *testing.T) {
	jm := flinkjobtest.New(t, "nocheckpoints-root-1202-1a2b")
	jm.NoCheckpoints("nocheckpoints-root-1202-1a2b")
	h := flinkReader(t, jm, "nocheckpoints-root-1202-1a2b", 0)
	h.poll()
	// The gate's watcher: one per JobManager and job in a process.
	watcher := flinkjob.Watch(jm.Addr(), "nocheckpoints", flinkjob.Options{})
	defer watcher.Release()
	awaitCondition(t, "the watcher hears the job does not checkpoint", func() bool {
		return watcher.Err(time.Hour) != nil
	})
	_, err := h.r.beginBundle(metricstest.BundleContext(), Restriction{Seq: 1, Owner: processID, AckIDs: []string{"x"}}, 10)
	if err == nil {
		t.Fatal("a bundle began although the job does not checkpoint")
	}
	if !strings.Contains(err.Error(), "does not checkpoint") || !strings.Contains(err.Error(), "checkpointingInterval") {
		t.Errorf("bundle error %v, want one saying the job does not checkpoint and naming checkpointingInterval", err)
	}
}
