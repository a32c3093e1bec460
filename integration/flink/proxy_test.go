package flink

import (
	"context"
	"net"
	"testing"
	"time"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// fakeJobService records what Prepare received and streams three
// messages from GetMessageStream.
type fakeJobService struct {
	jobpb.UnimplementedJobServiceServer
	prepared chan *structpb.Struct
}

func (s *fakeJobService) Prepare(_ context.Context, req *jobpb.PrepareJobRequest) (*jobpb.PrepareJobResponse, error) {
	s.prepared <- req.GetPipelineOptions()
	return &jobpb.PrepareJobResponse{PreparationId: "prep-1"}, nil
}

func (s *fakeJobService) GetMessageStream(req *jobpb.JobMessagesRequest, stream jobpb.JobService_GetMessageStreamServer) error {
	for i := range 3 {
		msg := &jobpb.JobMessagesResponse{Response: &jobpb.JobMessagesResponse_StateResponse{
			StateResponse: &jobpb.JobStateEvent{State: jobpb.JobState_Enum(i + 1)},
		}}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}

func (s *fakeJobService) Cancel(context.Context, *jobpb.CancelJobRequest) (*jobpb.CancelJobResponse, error) {
	return nil, status.Error(codes.NotFound, "no such job")
}

// TestOptionsProxy: Prepare gets the added options (overriding the
// submitter's), a server stream and an error status pass through.
func TestOptionsProxy(t *testing.T) {
	fake := &fakeJobService{prepared: make(chan *structpb.Struct, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	jobpb.RegisterJobServiceServer(srv, fake)
	go srv.Serve(lis)
	defer srv.Stop()

	proxy, err := StartOptionsProxy(lis.Addr().String(), map[string]any{"checkpointingInterval": 2000, "stateBackend": "hashmap"})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Stop()
	conn, err := grpc.NewClient(proxy.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := jobpb.NewJobServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	sent, _ := structpb.NewStruct(map[string]any{
		"beam:option:go_options:v1":             map[string]any{"options": map[string]any{"runner": "flink"}},
		"beam:option:checkpointing_interval:v1": 5,
	})
	resp, err := client.Prepare(ctx, &jobpb.PrepareJobRequest{PipelineOptions: sent, JobName: "j"})
	if err != nil || resp.GetPreparationId() != "prep-1" {
		t.Fatalf("Prepare through the proxy: %v, %v", resp, err)
	}
	got := (<-fake.prepared).AsMap()
	want := map[string]any{
		"beam:option:checkpointing_interval:v1": float64(2000),
		"beam:option:state_backend:v1":          "hashmap",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("option %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["beam:option:go_options:v1"]; !ok {
		t.Errorf("the submitter's options were dropped: %v", got)
	}

	stream, err := client.GetMessageStream(ctx, &jobpb.JobMessagesRequest{JobId: "x"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
		n++
	}
	if n != 3 {
		t.Errorf("GetMessageStream through the proxy: %d messages, want 3", n)
	}

	_, err = client.Cancel(ctx, &jobpb.CancelJobRequest{JobId: "x"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Cancel through the proxy: %v, want the server's NotFound", err)
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"checkpointingInterval":                       "checkpointing_interval",
		"retainExternalizedCheckpointsOnCancellation": "retain_externalized_checkpoints_on_cancellation",
		"parallelism":                                 "parallelism",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
