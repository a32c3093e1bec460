package flink

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"unicode"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pubsubio/beam-pubsubio/integration/grpcproxy"
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

	proxy   *grpcproxy.Proxy
	mu      sync.Mutex
	options map[string]any
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
	p := &OptionsProxy{options: maps.Clone(options)}
	proxy, err := grpcproxy.Start(target, func(method string, fromClient bool, msg []byte) ([]byte, error) {
		if method != prepareMethod || !fromClient {
			return msg, nil
		}
		return p.rewrite(msg)
	})
	if err != nil {
		return nil, fmt.Errorf("flink: options proxy: %w", err)
	}
	p.proxy, p.Endpoint = proxy, proxy.Addr
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
func (p *OptionsProxy) Stop() { p.proxy.Stop() }

// rewrite adds the options to a PrepareJobRequest.
func (p *OptionsProxy) rewrite(msg []byte) ([]byte, error) {
	var req jobpb.PrepareJobRequest
	if err := proto.Unmarshal(msg, &req); err != nil {
		return nil, fmt.Errorf("flink options proxy: decoding Prepare: %w", err)
	}
	if req.PipelineOptions == nil {
		req.PipelineOptions = &structpb.Struct{}
	}
	if req.PipelineOptions.Fields == nil {
		req.PipelineOptions.Fields = map[string]*structpb.Value{}
	}
	add, err := structpb.NewStruct(toURNs(p.Options()))
	if err != nil {
		return nil, err
	}
	for k, v := range add.Fields {
		req.PipelineOptions.Fields[k] = v
	}
	return proto.Marshal(&req)
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
