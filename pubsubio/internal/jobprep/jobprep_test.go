package jobprep

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

// jobService is a job service that records the options of the jobs it
// prepares.
type jobService struct {
	jobpb.UnimplementedJobServiceServer
	prepared chan *structpb.Struct
}

func (s *jobService) Prepare(_ context.Context, req *jobpb.PrepareJobRequest) (*jobpb.PrepareJobResponse, error) {
	s.prepared <- req.GetPipelineOptions()
	return &jobpb.PrepareJobResponse{PreparationId: "p"}, nil
}

// prepare sends req to a new job service through Beam's dialer, as a
// launcher does, and returns the pipeline options the service received.
func prepare(t *testing.T, req *jobpb.PrepareJobRequest) map[string]any {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &jobService{prepared: make(chan *structpb.Struct, 1)}
	srv := grpc.NewServer()
	jobpb.RegisterJobServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := grpcx.Dial(ctx, lis.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := jobpb.NewJobServiceClient(cc).Prepare(ctx, req); err != nil {
		t.Fatal(err)
	}
	return (<-s.prepared).AsMap()
}

// A job prepared through Beam's dialer carries the added options as
// top-level pipeline options, beside the ones the launcher sent.
func TestAddedOptionsReachPrepare(t *testing.T) {
	if err := AddOptions(map[string]any{"checkpointingInterval": 2000, "finishBundleBeforeCheckpointing": true}); err != nil {
		t.Fatal(err)
	}
	if err := AddOptions(map[string]any{"checkpointingInterval": 5000, "stateBackend": "hashmap"}); err != nil {
		t.Fatal(err)
	}
	sent, _ := structpb.NewStruct(map[string]any{"beam:option:app_name:v1": "orders"})
	got := prepare(t, &jobpb.PrepareJobRequest{JobName: "orders", PipelineOptions: sent})
	want := map[string]any{
		"beam:option:app_name:v1":                           "orders",
		"beam:option:checkpointing_interval:v1":             5000.0,
		"beam:option:finish_bundle_before_checkpointing:v1": true,
		"beam:option:state_backend:v1":                      "hashmap",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prepared options (-want +got):\n%s", diff)
	}
}

// An experiment reaches the jobs whose pipeline needs it, beside the
// experiments the launcher sent, once.
func TestExperimentReachesThePipelinesThatNeedIt(t *testing.T) {
	needs := func(p *pipepb.Pipeline) bool { return p.GetComponents().GetTransforms()["stateful"] != nil }
	AddExperiment("no_splits", needs)
	AddExperiment("no_splits", needs)
	for _, c := range []struct {
		transform string
		want      []any
	}{
		{"stateful", []any{"beam_fn_api", "no_splits"}},
		{"stateless", []any{"beam_fn_api"}},
	} {
		sent, _ := structpb.NewStruct(map[string]any{experimentsKey: []any{"beam_fn_api"}})
		pipeline := &pipepb.Pipeline{Components: &pipepb.Components{Transforms: map[string]*pipepb.PTransform{c.transform: {}}}}
		got := prepare(t, &jobpb.PrepareJobRequest{Pipeline: pipeline, PipelineOptions: sent})[experimentsKey]
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("experiments of a pipeline with a %s transform (-want +got):\n%s", c.transform, diff)
		}
	}
}

// A dial that finds no server fails within its timeout, as Beam's does.
func TestDialTimesOut(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	if _, err := dial(context.Background(), addr, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("dial of a closed port: %v, want an error naming %s", err, addr)
	}
}

// Names in another spelling, and values a pipeline option cannot hold,
// are refused, naming them.
func TestAddRefuses(t *testing.T) {
	for _, c := range []struct {
		options map[string]any
		want    string
	}{
		{map[string]any{"checkpointing_interval": 1}, `"checkpointing_interval"`},
		{map[string]any{"beam:option:x:v1": 1}, `"beam:option:x:v1"`},
		{map[string]any{"stateBackend": struct{}{}}, "stateBackend"},
	} {
		err := AddOptions(c.options)
		if !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddOptions(%v) = %v, want ErrOption naming %s", c.options, err, c.want)
		}
	}
}
