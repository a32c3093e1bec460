// Package flinksubmit adds Beam Java pipeline options to the jobs a Beam
// Go launcher prepares on a job server. Beam Go sends its flags nested
// under one option, beam:option:go_options:v1, which Beam's Flink runner
// does not read (docs/upstream/go-runner-options.md): without this a Go
// pipeline cannot turn on Flink's checkpoints.
//
// It replaces Beam Go's gRPC dialer (grpcx.Dial, which Beam documents as
// replaceable) with one that dials as Beam's default does and rewrites
// each PrepareJobRequest on the way out.
package flinksubmit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"sync"
	"time"
	"unicode"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// ErrOption is the error of an option that cannot be sent.
var ErrOption = errors.New("invalid Flink pipeline option")

var added = struct {
	sync.Mutex
	options   map[string]any
	installed bool
}{options: map[string]any{}}

// Add adds options, by their Beam Java names ("checkpointingInterval", as
// FlinkPipelineOptions spells them) with bool, number or string values, to
// every job this process prepares from now on; a later value for a name
// replaces an earlier one.
func Add(options map[string]any) error {
	for name, v := range options {
		if name == "" || !unicode.IsLower(rune(name[0])) || strings.ContainsAny(name, ":_ ") {
			return fmt.Errorf("%w: name %q: use the Java option's name, e.g. checkpointingInterval", ErrOption, name)
		}
		if _, err := structpb.NewValue(v); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrOption, name, err)
		}
	}
	added.Lock()
	defer added.Unlock()
	maps.Copy(added.options, options)
	if !added.installed {
		grpcx.Dial = dial
		added.installed = true
	}
	return nil
}

// options returns the options added so far.
func options() map[string]any {
	added.Lock()
	defer added.Unlock()
	return maps.Clone(added.options)
}

// dial dials as grpcx.DefaultDial does, blocking until the connection is
// ready or timeout passes, and adds the options to Prepare calls.
func dial(ctx context.Context, endpoint string, timeout time.Duration) (*grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cc, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
		grpc.WithChainUnaryInterceptor(addToPrepare))
	if err != nil {
		return nil, fmt.Errorf("failed to dial server at %v: %w", endpoint, err)
	}
	cc.Connect()
	for state := cc.GetState(); state != connectivity.Ready; state = cc.GetState() {
		if !cc.WaitForStateChange(ctx, state) {
			cc.Close()
			return nil, fmt.Errorf("failed to dial server at %v: %w (last state %v)", endpoint, ctx.Err(), state)
		}
	}
	return cc, nil
}

// addToPrepare adds the options to a PrepareJobRequest.
func addToPrepare(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if p, ok := req.(*jobpb.PrepareJobRequest); ok {
		if p.PipelineOptions == nil {
			p.PipelineOptions = &structpb.Struct{}
		}
		if p.PipelineOptions.Fields == nil {
			p.PipelineOptions.Fields = map[string]*structpb.Value{}
		}
		for name, v := range options() {
			value, _ := structpb.NewValue(v) // checked by Add
			p.PipelineOptions.Fields[urn(name)] = value
		}
	}
	return invoke(ctx, method, req, reply, cc, opts...)
}

// urn is the key of the Java option name in a pipeline options struct:
// checkpointingInterval -> beam:option:checkpointing_interval:v1, which
// Beam Java reads back as checkpointingInterval.
func urn(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return "beam:option:" + b.String() + ":v1"
}
