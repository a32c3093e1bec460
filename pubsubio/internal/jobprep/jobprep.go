// Package jobprep adds to the jobs a Beam Go launcher prepares on a job
// service what Beam Go's flags cannot say for a transform: Beam Java
// pipeline options, which Beam's Flink runner reads and Beam Go cannot send
// (it nests its flags under beam:option:go_options:v1,
// docs/upstream/go-runner-options.md), and experiments a transform needs
// of the runner, for the jobs that hold it.
//
// It replaces Beam Go's gRPC dialer (grpcx.Dial, which Beam documents as
// replaceable) with one that dials as Beam's default does and rewrites
// each PrepareJobRequest on the way out.
package jobprep

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
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// ErrOption is the error of an option that cannot be sent.
var ErrOption = errors.New("invalid Beam Java pipeline option")

var added = struct {
	sync.Mutex
	options     map[string]any
	experiments map[string]func(*pipepb.Pipeline) bool
	installed   bool
}{options: map[string]any{}, experiments: map[string]func(*pipepb.Pipeline) bool{}}

// install puts the dialer in place of Beam's; added is locked.
func install() {
	if !added.installed {
		grpcx.Dial = dial
		added.installed = true
	}
}

// AddOptions adds options, by their Beam Java names
// ("checkpointingInterval", as FlinkPipelineOptions spells them) with
// bool, number or string values, to every job this process prepares from
// now on; a later value for a name replaces an earlier one.
func AddOptions(options map[string]any) error {
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
	install()
	return nil
}

// AddExperiment adds the experiment (beam:option:experiments:v1) to every
// job this process prepares from now on whose pipeline needs it, as needs
// says.
func AddExperiment(experiment string, needs func(*pipepb.Pipeline) bool) {
	added.Lock()
	defer added.Unlock()
	added.experiments[experiment] = needs
	install()
}

// snapshot returns the options and experiments added so far.
func snapshot() (map[string]any, map[string]func(*pipepb.Pipeline) bool) {
	added.Lock()
	defer added.Unlock()
	return maps.Clone(added.options), maps.Clone(added.experiments)
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

// addToPrepare adds the options, and the experiments the pipeline needs,
// to a PrepareJobRequest.
func addToPrepare(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if p, ok := req.(*jobpb.PrepareJobRequest); ok {
		if p.PipelineOptions == nil {
			p.PipelineOptions = &structpb.Struct{}
		}
		fields := p.PipelineOptions.Fields
		if fields == nil {
			fields = map[string]*structpb.Value{}
			p.PipelineOptions.Fields = fields
		}
		options, experiments := snapshot()
		for name, v := range options {
			value, _ := structpb.NewValue(v) // checked by AddOptions
			fields[urn(name)] = value
		}
		for experiment, needs := range experiments {
			if needs(p.GetPipeline()) {
				addExperiment(fields, experiment)
			}
		}
	}
	return invoke(ctx, method, req, reply, cc, opts...)
}

// experimentsKey is where a job's experiments are: a list of strings.
const experimentsKey = "beam:option:experiments:v1"

// addExperiment adds experiment to the list in fields, unless there.
func addExperiment(fields map[string]*structpb.Value, experiment string) {
	list := fields[experimentsKey].GetListValue()
	if list == nil {
		list = &structpb.ListValue{}
		fields[experimentsKey] = structpb.NewListValue(list)
	}
	for _, v := range list.Values {
		if v.GetStringValue() == experiment {
			return
		}
	}
	list.Values = append(list.Values, structpb.NewStringValue(experiment))
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
