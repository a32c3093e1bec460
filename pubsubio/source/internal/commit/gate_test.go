package commit

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/flinkjob/flinkjobtest"
)

func seqs(bs []Batch) []int64 {
	var out []int64
	for _, b := range bs {
		out = append(out, b.Seq)
	}
	return out
}

// On Prism and Dataflow the runner persists a residual only with its
// bundle's output: the next bundle acks what the one before it emitted.
func TestResumeAcksTheBundleBefore(t *testing.T) {
	var g Gate = Resume{}
	if c, err := g.Begin(0, Batch{Seq: -1, Local: true}); err != nil || len(c.Ack)+len(c.Void) != 0 {
		t.Errorf("Begin of the first bundle = %+v, %v; want nothing cleared", c, err)
	}
	before := Batch{Seq: 4, Local: true, IDs: []string{"a", "b"}}
	c, err := g.Begin(5, before)
	if err != nil || !cmp.Equal(c, Cleared{Ack: []Batch{before}}) {
		t.Errorf("Begin(5) = %+v, %v; want bundle 4's batch acked", c, err)
	}
	if c := g.Finalized(before); !cmp.Equal(c, Cleared{Ack: []Batch{before}}) {
		t.Errorf("Finalized = %+v, want the finalized batch acked", c)
	}
	if g.Waiting() {
		t.Error("Resume waits for nothing, but Waiting reported true")
	}
}

// On Flink what bundle N emitted waits until a checkpoint triggered after
// bundle N+1 began completes.
func TestCheckpointAcksOnceACheckpointCovers(t *testing.T) {
	const name = "orders-root-1-a"
	jm := flinkjobtest.New(t, name)
	var settled atomic.Int32
	g := NewCheckpoint(jm.Addr(), "orders", time.Minute, func() { settled.Add(1) })
	defer g.Release()
	jm.AwaitAnswers(t, 2)
	if _, err := g.Begin(0, Batch{Seq: -1, Local: true}); err != nil {
		t.Fatal(err)
	}
	emitted := Batch{Seq: 0, Local: true, IDs: []string{"a"}}
	c, err := g.Begin(1, emitted)
	if err != nil || len(c.Ack) != 0 {
		t.Fatalf("Begin(1) = %+v, %v; want nothing acked before a checkpoint", c, err)
	}
	if !g.Waiting() {
		t.Fatal("Waiting = false with bundle 0's batch uncovered")
	}
	jm.AwaitAnswers(t, 2)
	before := settled.Load()
	jm.Checkpoint(name)
	flinkjobtest.Await(t, "the watcher to call settled after the checkpoint", func() bool { return settled.Load() > before })
	if c := g.Settle(); !cmp.Equal(seqs(c.Ack), []int64{0}) || len(c.Void) != 0 {
		t.Errorf("Settle after the checkpoint = %+v, want bundle 0's batch acked", c)
	}
	if g.Waiting() {
		t.Error("Waiting = true after the covering checkpoint")
	}
}

// A restore that brings back bundle 1 in this process: bundle 0's output
// is durable (the restored checkpoint holds bundle 1's restriction), and
// what bundle 1 emitted before the restore is the retry's to emit again.
func TestCheckpointRestoreAcksWhatCameBefore(t *testing.T) {
	const name = "restore-root-1-a"
	jm := flinkjobtest.New(t, name)
	g := NewCheckpoint(jm.Addr(), "restore", time.Minute, func() {})
	defer g.Release()
	b0 := Batch{Seq: 0, Local: true, IDs: []string{"a"}}
	b1 := Batch{Seq: 1, Local: true, IDs: []string{"b"}}
	for seq, before := range []Batch{{Seq: -1, Local: true}, b0, b1} {
		if _, err := g.Begin(int64(seq), before); err != nil {
			t.Fatal(err)
		}
	}
	c, err := g.Begin(1, b0)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(c.Ack); len(got) == 0 || got[0] != 0 || len(c.Void) != 0 {
		t.Errorf("Begin of the restored bundle 1 = %+v, want only bundle 0's batch acked", c)
	}
	for _, b := range c.Ack {
		if b.Seq != 0 {
			t.Errorf("bundle %d's batch acked on restore; only bundle 0's is durable", b.Seq)
		}
	}
	if g.Waiting() {
		t.Error("Waiting = true after the restore: bundle 1's batch is the retry's to emit again")
	}
}
