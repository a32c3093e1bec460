package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The cross-worker ack: on Dataflow and Flink a split's residual can
// resume in another worker process, which can ack what the residual
// carries only with the Acknowledge RPC. Here the first process is a child
// (this test binary, re-run in the emitter role) that reads a pstest
// server over TCP, runs the read's bundles until it has emitted every
// message, and hands its last residual over; this process resumes it.

const (
	crossProcessRole     = "PUBSUBIO_TEST_CROSS_PROCESS_ROLE"
	crossProcessEndpoint = "PUBSUBIO_TEST_CROSS_PROCESS_ENDPOINT"
	crossProcessSub      = "PUBSUBIO_TEST_CROSS_PROCESS_SUBSCRIPTION"
	crossProcessCount    = 30
)

// handover is what the emitting process writes: the residual of its last
// bundle, and the IDs that bundle and the earlier ones emitted.
type handover struct {
	Residual    Restriction
	LastBundle  []string // message IDs the residual's ack IDs belong to
	EarlierAcks []string // message IDs emitted and acked in process before it
}

// crossProcessConfig is the read both processes run, with one split.
func crossProcessConfig(t *testing.T, endpoint string, sub model.Subscription) Config {
	return testConfig(t, func(c *Config) {
		c.Subscriptions = []model.Subscription{sub}
		c.Connection = connection.Settings{EmulatorEndpoint: endpoint}
	})
}

// runCrossProcessBundle runs one bundle of fn's split 0 on rest, returning the IDs
// of what it emitted and the residual it checkpointed.
func runCrossProcessBundle(t *testing.T, fn *readFn, rest Restriction) (ids []string, residual Restriction) {
	t.Helper()
	msgs, residual := runTestBundle(t, fn, rest)
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	return ids, residual
}

// runTestBundle runs one bundle of fn's split 0 on rest, returning what it
// emitted and the residual it checkpointed.
func runTestBundle(t *testing.T, fn *readFn, rest Restriction) (msgs []model.Message, residual Restriction) {
	t.Helper()
	rt := sdf.NewLockRTracker(newTracker(rest, processID))
	we := fn.CreateWatermarkEstimator(0)
	split := Split{Index: 0, Subscription: fn.Cfg.Subscriptions[0]}
	emit := func(_ beam.EventTime, m model.Message) { msgs = append(msgs, m) }
	dead := func(beam.EventTime, dlq.FailedMessage) { t.Error("a dead letter from plain messages") }
	if _, err := fn.ProcessElement(context.Background(), we, rt, split, emit, dead); err != nil {
		t.Fatalf("bundle %d: %v", rest.Seq, err)
	}
	_, res, err := rt.TrySplit(0)
	if err != nil || res == nil {
		t.Fatalf("bundle %d: self-checkpoint gave %v, %v", rest.Seq, res, err)
	}
	return msgs, res.(Restriction)
}

// A residual emitted in one worker process and resumed in another has its
// messages acked with the Acknowledge RPC: exactly those, each once, none
// lost; and the first process's later release, which gives back what it
// still holds, brings none of them back.
func TestResidualResumedInAnotherProcessAcksByRPC(t *testing.T) {
	if os.Getenv(crossProcessRole) == "emitter" {
		emitAndHandOver(t)
		return
	}
	f := newFakeServer(t)
	topic, subs := f.topicWithSubs(t, "cross-process", 1)
	ids := f.publish(t, topic, crossProcessCount, nil)

	cmd := exec.Command(os.Args[0], "-test.run=^TestResidualResumedInAnotherProcessAcksByRPC$", "-test.v")
	cmd.Env = append(os.Environ(), crossProcessRole+"=emitter", crossProcessEndpoint+"="+f.srv.Addr, crossProcessSub+"="+subs[0].String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	h, err := readHandover(stdout, time.Minute)
	if err != nil {
		t.Fatalf("the emitting process handed nothing over: %v; its stderr:\n%s", err, stderr.String())
	}
	if got := append(slices.Clone(h.EarlierAcks), h.LastBundle...); !sameIDs(got, ids) {
		t.Fatalf("the emitting process emitted %d messages, want the %d published", len(got), len(ids))
	}
	if len(h.LastBundle) == 0 || len(h.Residual.AckIDs) != len(h.LastBundle) {
		t.Fatalf("the residual carries %d ack IDs for a last bundle of %d messages", len(h.Residual.AckIDs), len(h.LastBundle))
	}
	// The emitter waits on its stdin now: what it acked reaches the server
	// (the client sends acks in batches every 100 ms), what the residual
	// carries does not.
	awaitCondition(t, fmt.Sprintf("the %d messages the emitter acked in process acked on the server", len(h.EarlierAcks)), func() bool {
		return f.acked(h.EarlierAcks) == len(h.EarlierAcks)
	})
	if n := f.acked(h.LastBundle); n != 0 {
		t.Fatalf("%d of the residual's %d messages are acked before it resumed", n, len(h.LastBundle))
	}

	// Resume the residual here, in another process.
	fn := &readFn{ReadID: "cross-process-resumer", SplitCount: 1, Cfg: crossProcessConfig(t, f.srv.Addr, subs[0])}
	fn.Setup()
	defer fn.Teardown()
	if h.Residual.Owner == processID {
		t.Fatal("the residual names this process as its owner")
	}
	emitted, _ := runCrossProcessBundle(t, fn, h.Residual)
	if len(emitted) != 0 {
		t.Errorf("the resumed bundle emitted %d messages; every message was emitted by the first process", len(emitted))
	}
	if n := f.acked(h.LastBundle); n != len(h.LastBundle) {
		t.Fatalf("after the resumed bundle %d of the residual's %d messages are acked", n, len(h.LastBundle))
	}
	if got := fn.rs.stats.get(acksRPC); got != int64(len(h.LastBundle)) {
		t.Errorf("acks by RPC counted %d, want %d", got, len(h.LastBundle))
	}

	// The first process releases its split: it gives back, with the RPC,
	// what it still holds, which includes what was just acked here.
	if _, err := io.WriteString(stdin, "release\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the emitting process failed: %v; its stderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the emitting process did not release and exit within a minute; its stderr:\n%s", stderr.String())
	}
	for _, id := range ids {
		m := f.srv.Message(id)
		if m.Acks != 1 || m.Deliveries != 1 {
			t.Errorf("message %s: %d acks and %d deliveries on the server, want 1 and 1", id, m.Acks, m.Deliveries)
		}
	}
	gaveBack := 0
	for _, id := range h.LastBundle {
		for _, ma := range f.srv.Message(id).Modacks {
			if ma.AckDeadline == 0 {
				gaveBack++
			}
		}
	}
	if gaveBack < len(h.LastBundle) {
		t.Errorf("the first process's release gave back %d of the residual's %d messages: the case under test (a release after another process acked) did not happen", gaveBack, len(h.LastBundle))
	}
	t.Logf("%d messages: %d acked in the first process, %d by RPC in the second; the first process's release sent %d give-backs for them, and none came back",
		len(ids), len(h.EarlierAcks), len(h.LastBundle), gaveBack)
}

// emitAndHandOver is the first process: it runs bundles until every
// message was emitted, writes the handover to stdout, waits for a line on
// stdin and releases its split.
func emitAndHandOver(t *testing.T) {
	sub, err := model.ParseSubscription(os.Getenv(crossProcessSub))
	if err != nil {
		t.Fatal(err)
	}
	fn := &readFn{ReadID: "cross-process-emitter", SplitCount: 1, Cfg: crossProcessConfig(t, os.Getenv(crossProcessEndpoint), sub)}
	fn.Setup()
	var h handover
	rest := Restriction{}
	deadline := time.Now().Add(45 * time.Second)
	for total := 0; total < crossProcessCount; {
		if time.Now().After(deadline) {
			t.Fatalf("emitted %d of %d messages within 45s", total, crossProcessCount)
		}
		ids, residual := runCrossProcessBundle(t, fn, rest)
		if len(ids) == 0 {
			time.Sleep(fn.Cfg.PollDelay) // as the runner would: ResumeProcessingIn(PollDelay)
			rest = residual
			continue
		}
		// What the bundle before this one emitted was acked when this one
		// began.
		h.EarlierAcks = append(h.EarlierAcks, h.LastBundle...)
		h.LastBundle = ids
		h.Residual = residual
		rest = residual
		total += len(ids)
	}
	if err := json.NewEncoder(os.Stdout).Encode(h); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the release: %v", err)
	}
	fn.Teardown()
}

// readHandover reads the JSON line the emitting process writes among the
// test framework's own output, within timeout.
func readHandover(r io.Reader, timeout time.Duration) (handover, error) {
	got := make(chan handover, 1)
	failed := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var h handover
			if json.Unmarshal(sc.Bytes(), &h) == nil && len(h.LastBundle) > 0 {
				got <- h
				io.Copy(io.Discard, r) // keep the child's stdout drained
				return
			}
		}
		failed <- fmt.Errorf("its stdout ended: %v", sc.Err())
	}()
	select {
	case h := <-got:
		return h, nil
	case err := <-failed:
		return handover{}, err
	case <-time.After(timeout):
		return handover{}, fmt.Errorf("nothing within %v", timeout)
	}
}

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func sameIDs(a, b []string) bool {
	return slices.Equal(sorted(a), sorted(b))
}
