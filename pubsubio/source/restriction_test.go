package source

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/exec"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var testRestrictions = []Restriction{
	{},
	{
		Seq:     42,
		Owner:   "0123456789abcdef",
		AckIDs:  []string{"projects/p/subscriptions/s:1", "ack-2", "", "message:m-3", "a very long ack id " + string(bytes.Repeat([]byte("x"), 300))},
		Emitted: 1 << 40,
		Final:   true,
	},
	{Seq: 1, Owner: "o", AckIDs: []string{"only"}, Emitted: 1},
}

var testSplits = []Split{
	{},
	{Index: 0, Subscription: model.SubscriptionOf("pubsubio-test", "sub-0")},
	{Index: 7, Subscription: model.SubscriptionOf("example.com:my-project", "sub.with~chars+%")},
}

// roundTrip encodes v with c and decodes it back, as a worker does.
func roundTrip(t *testing.T, c *coder.Coder, v *exec.FullValue) *exec.FullValue {
	t.Helper()
	var buf bytes.Buffer
	if err := exec.MakeElementEncoder(c).Encode(v, &buf); err != nil {
		t.Fatalf("encode %+v with %v: %v", v, c, err)
	}
	got, err := exec.MakeElementDecoder(c).Decode(&buf)
	if err != nil {
		t.Fatalf("decode %+v with %v: %v", v, c, err)
	}
	if buf.Len() != 0 {
		t.Errorf("decoding %+v with %v left %d bytes unread", v, c, buf.Len())
	}
	return got
}

// throughModel marshals c into the pipeline proto's coder table and back,
// the path a coder takes from the launcher to a worker.
func throughModel(t *testing.T, c *coder.Coder) *coder.Coder {
	t.Helper()
	ids, models, err := graphx.MarshalCoders([]*coder.Coder{c})
	if err != nil {
		t.Fatalf("marshal coder %v: %v", c, err)
	}
	cs, err := graphx.UnmarshalCoders(ids, models)
	if err != nil {
		t.Fatalf("unmarshal coder %v: %v", c, err)
	}
	return cs[0]
}

// The coder Beam infers for the registered element and restriction types
// (beam.NewElementEncoder/Decoder, i.e. what inferCoder picks) round-trips
// them.
func TestRestrictionAndSplitInferredCoderRoundTrip(t *testing.T) {
	enc := beam.NewElementEncoder(reflect.TypeOf(Restriction{}))
	dec := beam.NewElementDecoder(reflect.TypeOf(Restriction{}))
	for _, want := range testRestrictions {
		var buf bytes.Buffer
		if err := enc.Encode(want, &buf); err != nil {
			t.Fatalf("encode %+v: %v", want, err)
		}
		got, err := dec.Decode(&buf)
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Restriction round trip (-want +got):\n%s", diff)
		}
	}
	enc = beam.NewElementEncoder(reflect.TypeOf(Split{}))
	dec = beam.NewElementDecoder(reflect.TypeOf(Split{}))
	for _, want := range testSplits {
		var buf bytes.Buffer
		if err := enc.Encode(want, &buf); err != nil {
			t.Fatalf("encode %+v: %v", want, err)
		}
		got, err := dec.Decode(&buf)
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Split round trip (-want +got):\n%s", diff)
		}
	}
}

// The coders the read's own graph carries: the SDF edge's restriction coder
// (KV<Restriction, watermark state>) and its input's Split coder, taken
// through the pipeline proto as a runner hands them to a worker.
func TestRestrictionAndSplitCodersOfTheReadGraph(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	if _, err := TryRead(s, Config{Subscriptions: testSubs(2)}); err != nil {
		t.Fatalf("TryRead: %v", err)
	}
	edges, _, err := p.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	var sdfEdge *graph.MultiEdge
	for _, e := range edges {
		if e.DoFn == nil {
			continue
		}
		switch (*graph.Fn)(e.DoFn).Recv.(type) {
		case *readFn, *finalizingReadFn:
			sdfEdge = e
		}
	}
	if sdfEdge == nil {
		t.Fatalf("no read SDF edge among %d edges", len(edges))
	}
	if sdfEdge.RestrictionCoder == nil {
		t.Fatalf("the read SDF edge has no restriction coder")
	}

	rc := throughModel(t, sdfEdge.RestrictionCoder)
	if rc.Kind != coder.KV || len(rc.Components) != 2 {
		t.Fatalf("restriction coder %v: want KV<Restriction, watermark state>", rc)
	}
	for i, want := range testRestrictions {
		state := int64(1_700_000_000_000 + i)
		got := roundTrip(t, rc, &exec.FullValue{Elm: want, Elm2: state})
		if diff := cmp.Diff(want, got.Elm); diff != "" {
			t.Errorf("Restriction through %v (-want +got):\n%s", rc, diff)
		}
		if got.Elm2 != state {
			t.Errorf("watermark state through %v: got %v, want %d", rc, got.Elm2, state)
		}
	}

	sc := throughModel(t, sdfEdge.Input[0].From.Coder)
	for _, want := range testSplits {
		got := roundTrip(t, sc, &exec.FullValue{Elm: want})
		if diff := cmp.Diff(want, got.Elm); diff != "" {
			t.Errorf("Split through %v (-want +got):\n%s", sc, diff)
		}
	}
}

func TestTrackerClaims(t *testing.T) {
	rest := Restriction{Seq: 4, Owner: "previous-owner", AckIDs: []string{"old-1"}, Emitted: 10}
	tr := newTracker(rest, "me")
	if tr.IsDone() {
		t.Fatal("a new tracker is done")
	}
	for _, id := range []ackID{"a", "b", "c"} {
		if !tr.TryClaim(claimOf(id)) {
			t.Fatalf("TryClaim(%q) = false", id)
		}
	}
	if diff := cmp.Diff([]ackID{"a", "b", "c"}, tr.claimedIDs()); diff != "" {
		t.Errorf("claimed IDs (-want +got):\n%s", diff)
	}
	if done, remaining := tr.GetProgress(); done != 3*claimSize || remaining != 1 {
		t.Errorf("GetProgress() = %v, %v; want the claimed bytes (%d) done and one unit remaining while the split runs without a backlog sample", done, remaining, 3*claimSize)
	}
	if tr.IsDone() || tr.GetError() != nil {
		t.Errorf("after claims: IsDone %v, GetError %v", tr.IsDone(), tr.GetError())
	}
	if diff := cmp.Diff(rest, tr.GetRestriction()); diff != "" {
		t.Errorf("GetRestriction changed by claims (-want +got):\n%s", diff)
	}
}

func TestTrackerCheckpointMovesClaimsIntoResidual(t *testing.T) {
	rest := Restriction{Seq: 4, Owner: "previous-owner", AckIDs: []string{"old-1"}, Emitted: 10}
	tr := newTracker(rest, "me")
	tr.TryClaim(claimOf("a"))
	tr.TryClaim(claimOf("b"))

	_, residual, err := tr.TrySplit(0)
	if err != nil {
		t.Fatalf("TrySplit(0): %v", err)
	}
	want := Restriction{Seq: 5, Owner: "me", AckIDs: []string{"a", "b"}, Emitted: 12}
	if diff := cmp.Diff(want, residual); diff != "" {
		t.Errorf("residual (-want +got):\n%s", diff)
	}
	if !tr.IsDone() {
		t.Error("tracker not done after the self-checkpoint")
	}
	if tr.TryClaim(claimOf("c")) {
		t.Error("TryClaim succeeded after the self-checkpoint")
	}
	if _, again, _ := tr.TrySplit(0); again != nil {
		t.Errorf("second TrySplit(0) returned residual %+v, want none", again)
	}
}

func TestTrackerCheckpointWithoutClaims(t *testing.T) {
	tr := newTracker(Restriction{Seq: 0, Emitted: 3}, "me")
	_, residual, err := tr.TrySplit(0)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := residual.(Restriction)
	if !ok {
		t.Fatalf("residual is %T, want Restriction", residual)
	}
	if r.Seq != 1 || r.Owner != "me" || len(r.AckIDs) != 0 || r.Emitted != 3 || r.Final {
		t.Errorf("residual %+v, want Seq 1, Owner me, no AckIDs, Emitted 3, not Final", r)
	}
}

func TestTrackerRefusesFractionalSplits(t *testing.T) {
	rest := Restriction{Seq: 2, Owner: "o", AckIDs: []string{"x"}, Emitted: 5}
	for _, fraction := range []float64{0.01, 0.5, 1} {
		tr := newTracker(rest, "me")
		tr.TryClaim(claimOf("a"))
		primary, residual, err := tr.TrySplit(fraction)
		if err != nil {
			t.Errorf("TrySplit(%v): error %v, want none", fraction, err)
		}
		if residual != nil {
			t.Errorf("TrySplit(%v): residual %+v, want none", fraction, residual)
		}
		if diff := cmp.Diff(rest, primary); diff != "" {
			t.Errorf("TrySplit(%v): primary changed (-want +got):\n%s", fraction, diff)
		}
		if tr.IsDone() {
			t.Errorf("TrySplit(%v) ended the tracker", fraction)
		}
		if !tr.TryClaim(claimOf("b")) {
			t.Errorf("TryClaim after a refused TrySplit(%v) failed", fraction)
		}
	}
}

func TestTrackerFinishAfterThisBundleMakesResidualFinal(t *testing.T) {
	tr := newTracker(Restriction{Seq: 1, Emitted: 9}, "me")
	tr.TryClaim(claimOf("a"))
	tr.finishAfterThisBundle()
	_, residual, err := tr.TrySplit(0)
	if err != nil {
		t.Fatal(err)
	}
	want := Restriction{Seq: 2, Owner: "me", AckIDs: []string{"a"}, Emitted: 10, Final: true}
	if diff := cmp.Diff(want, residual); diff != "" {
		t.Errorf("residual (-want +got):\n%s", diff)
	}
}

func TestTrackerFinishClaimEndsSplit(t *testing.T) {
	tr := newTracker(Restriction{Seq: 3, Final: true, AckIDs: []string{"a"}}, "me")
	if tr.TryClaim(finishClaim{}) {
		t.Error("TryClaim(finishClaim{}) = true, want false (nothing more to claim)")
	}
	if !tr.IsDone() {
		t.Error("not done after finishClaim")
	}
	if tr.GetError() != nil {
		t.Errorf("GetError after finishClaim: %v", tr.GetError())
	}
	if tr.TryClaim(claimOf("late")) {
		t.Error("TryClaim succeeded after finishClaim")
	}
	if _, residual, _ := tr.TrySplit(0); residual != nil {
		t.Errorf("TrySplit after done returned residual %+v, want none", residual)
	}
	if _, remaining := tr.GetProgress(); remaining != 0 {
		t.Errorf("remaining work %v after done, want 0", remaining)
	}
}

func TestTrackerIsBoundedOnlyWhenFinal(t *testing.T) {
	if newTracker(Restriction{Seq: 1}, "me").IsBounded() {
		t.Error("IsBounded for a non-final restriction")
	}
	if !newTracker(Restriction{Seq: 1, Final: true}, "me").IsBounded() {
		t.Error("not IsBounded for a final restriction")
	}
}

func TestTrackerRejectsUnknownClaims(t *testing.T) {
	tr := newTracker(Restriction{}, "me")
	if tr.TryClaim(42) {
		t.Error("TryClaim(42) = true")
	}
	if tr.GetError() == nil {
		t.Error("no error after claiming an int")
	}
}

// claimSize is the size of every claimOf delivery.
const claimSize = 100

// claimOf is a claim of id, as the read makes them.
func claimOf(id ackID) *delivery { return &delivery{ackID: id, size: claimSize} }
