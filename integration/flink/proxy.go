package flink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"unicode"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// OptionsProxy is a job service in front of a Beam job server that adds
// pipeline options to every job it prepares and forwards everything else
// unchanged.
//
// Beam Go submits its flags nested under the one pipeline option
// beam:option:go_options:v1, beside a fixed few (job name, experiments,
// parallelism...). Beam Java's Flink runner reads only top-level options,
// so a Go pipeline cannot set checkpointingInterval, stateBackend,
// savepointPath or shutdownSourcesAfterIdleMs; through this proxy it can.
type OptionsProxy struct {
	// Endpoint is the proxy's job service, host:port, for --endpoint.
	Endpoint string

	target  string
	lis     net.Listener
	srv     *grpc.Server
	conn    *grpc.ClientConn
	mu      sync.Mutex
	options map[string]any
	stop    sync.Once
}

// prepareMethod is the one call the proxy rewrites.
const prepareMethod = "/org.apache.beam.model.job_management.v1.JobService/Prepare"

// StartOptionsProxy serves a proxy of the job service at target on a free
// loopback port. options maps Beam Java option names (as
// FlinkPipelineOptions spells them, "checkpointingInterval") to values
// (numbers, strings, bools); they override what the submitter sent.
func StartOptionsProxy(target string, options map[string]any) (*OptionsProxy, error) {
	if _, err := structpb.NewStruct(toURNs(options)); err != nil {
		return nil, fmt.Errorf("flink: pipeline options %v: %w", options, err)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("flink: options proxy: dial %s: %w", target, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("flink: options proxy: %w", err)
	}
	p := &OptionsProxy{Endpoint: lis.Addr().String(), target: target, lis: lis, conn: conn, options: maps.Clone(options)}
	p.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(p.forward))
	go p.srv.Serve(lis)
	return p, nil
}

// SetOptions replaces the options added to jobs prepared from now on.
func (p *OptionsProxy) SetOptions(options map[string]any) error {
	if _, err := structpb.NewStruct(toURNs(options)); err != nil {
		return fmt.Errorf("flink: pipeline options %v: %w", options, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.options = maps.Clone(options)
	return nil
}

// Options returns the options the proxy adds.
func (p *OptionsProxy) Options() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.options)
}

// Stop closes the proxy and its open calls.
func (p *OptionsProxy) Stop() {
	p.stop.Do(func() {
		p.srv.Stop()
		p.conn.Close()
	})
}

// forward relays one call, of any kind, to the target.
func (p *OptionsProxy) forward(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return errors.New("flink options proxy: no method")
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	cs, err := p.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	up := make(chan error, 1)
	go func() {
		for {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				if errors.Is(err, io.EOF) {
					up <- cs.CloseSend()
				} else {
					up <- err
				}
				return
			}
			if method == prepareMethod {
				if err := p.rewrite(&f); err != nil {
					up <- err
					return
				}
			}
			if err := cs.SendMsg(&f); err != nil {
				up <- nil // the target's status comes from RecvMsg below
				return
			}
		}
	}()
	for {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
		select {
		case err := <-up:
			if err != nil {
				return err
			}
		default:
		}
	}
}

// rewrite adds the options to a PrepareJobRequest.
func (p *OptionsProxy) rewrite(f *frame) error {
	var req jobpb.PrepareJobRequest
	if err := proto.Unmarshal(f.b, &req); err != nil {
		return fmt.Errorf("flink options proxy: decoding Prepare: %w", err)
	}
	if req.PipelineOptions == nil {
		req.PipelineOptions = &structpb.Struct{}
	}
	if req.PipelineOptions.Fields == nil {
		req.PipelineOptions.Fields = map[string]*structpb.Value{}
	}
	add, err := structpb.NewStruct(toURNs(p.Options()))
	if err != nil {
		return err
	}
	for k, v := range add.Fields {
		req.PipelineOptions.Fields[k] = v
	}
	b, err := proto.Marshal(&req)
	if err != nil {
		return err
	}
	f.b = b
	return nil
}

// toURNs turns Java option names into the keys of a pipeline options
// struct: checkpointingInterval -> beam:option:checkpointing_interval:v1.
func toURNs(options map[string]any) map[string]any {
	out := make(map[string]any, len(options))
	for k, v := range options {
		out["beam:option:"+snake(k)+":v1"] = v
	}
	return out
}

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// frame is one gRPC message, undecoded.
type frame struct{ b []byte }

// rawCodec passes frames through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

// Name is "proto", so the content type on the wire stays what both ends
// expect.
func (rawCodec) Name() string { return "proto" }
