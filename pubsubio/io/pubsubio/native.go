package pubsubio

import (
	"fmt"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/protox"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/protobuf/proto"
)

// Dataflow's native Pub/Sub transforms: Dataflow replaces them with its
// own reader and writer. They are built as Beam's package builds them, down
// to the names of the steps (this package is named pubsubio too, and so
// are its functions), so that Dataflow gets the job it got before the
// import changed (integration test TestDropInDataflowJobIsBeams).

const (
	nativeReadURN  = "beam:transform:pubsub_read:v1"
	nativeWriteURN = "beam:transform:pubsub_write:v1"
)

func init() {
	register.Function2x1(unmarshalMessageFn)
	register.Function2x1(marshalMessageFn)
	register.Function2x0(wrapInMessage)
	register.Emitter1[[]byte]()
	register.Emitter1[*pubsubpb.PubsubMessage]()
}

// readNative is Read on Dataflow. s is already scoped.
func readNative(s beam.Scope, project string, opts ReadOptions) beam.PCollection {
	payload := &pipepb.PubSubReadPayload{
		IdAttribute:        opts.IDAttribute,
		TimestampAttribute: opts.TimestampAttribute,
		WithAttributes:     opts.WithAttributes,
	}
	if opts.Topic != "" {
		payload.Topic = fmt.Sprintf("projects/%s/topics/%s", project, opts.Topic)
	} else {
		payload.Subscription = fmt.Sprintf("projects/%s/subscriptions/%s", project, opts.Subscription)
	}
	out := beam.External(s, nativeReadURN, protox.MustEncode(payload), nil, []beam.FullType{typex.New(reflectx.ByteSlice)}, false)
	if opts.WithAttributes {
		return beam.ParDo(s, unmarshalMessageFn, out[0])
	}
	return out[0]
}

// writeNative is Write on Dataflow, of col, a PCollection<*pb.PubsubMessage>
// (Write has converted []byte). s is already scoped.
func writeNative(s beam.Scope, project, topic string, col beam.PCollection) {
	payload := &pipepb.PubSubWritePayload{Topic: fmt.Sprintf("projects/%s/topics/%s", project, topic)}
	beam.External(s, nativeWriteURN, protox.MustEncode(payload), []beam.PCollection{beam.ParDo(s, marshalMessageFn, col)}, nil, false)
}

// unmarshalMessageFn decodes what Dataflow's reader emits with
// WithAttributes: a serialized PubsubMessage.
func unmarshalMessageFn(raw []byte, emit func(*pubsubpb.PubsubMessage)) error {
	var m pubsubpb.PubsubMessage
	if err := proto.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("pubsubio.Read: Dataflow's reader emitted a message that does not decode: %w", err)
	}
	emit(&m)
	return nil
}

// marshalMessageFn serializes a message for Dataflow's writer.
func marshalMessageFn(m *pubsubpb.PubsubMessage, emit func([]byte)) error {
	raw, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("pubsubio.Write: serializing a message for Dataflow's writer: %w", err)
	}
	emit(raw)
	return nil
}

// wrapInMessage makes a payload a message.
func wrapInMessage(data []byte, emit func(*pubsubpb.PubsubMessage)) {
	emit(&pubsubpb.PubsubMessage{Data: data})
}
