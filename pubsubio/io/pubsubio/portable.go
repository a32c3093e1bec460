package pubsubio

import (
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dedup"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/sink"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source"
)

// The portable implementation: pubsubio's read and write, on every runner.

func init() {
	register.Function1x1(payloadOf)
	register.Function1x1(protoOf)
	register.Function1x1(fromPayload)
	register.Function1x1(fromProto)
}

// readPortable is Read with pubsubio's read. s is already scoped.
func readPortable(s beam.Scope, project string, opts ReadOptions, conn connection.Settings) (beam.PCollection, error) {
	cfg := source.Config{TimestampAttribute: opts.TimestampAttribute, Connection: conn}
	if opts.Topic != "" {
		cfg.Topics = []model.Topic{model.TopicOf(project, opts.Topic)}
	} else {
		cfg.Subscriptions = []model.Subscription{model.SubscriptionOf(project, opts.Subscription)}
	}
	msgs, err := source.TryRead(s, cfg)
	if err != nil {
		return beam.PCollection{}, err
	}
	if opts.IDAttribute != "" {
		if msgs, err = dedup.TryDeduplicate(s, dedup.Config{IDAttribute: opts.IDAttribute}, msgs); err != nil {
			return beam.PCollection{}, err
		}
	}
	if opts.WithAttributes {
		return beam.ParDo(s, protoOf, msgs), nil
	}
	return beam.ParDo(s, payloadOf, msgs), nil
}

// writePortable is Write with pubsubio's write, of col, a
// PCollection<[]byte> or PCollection<*pb.PubsubMessage>. s is already
// scoped.
func writePortable(s beam.Scope, project, topic string, col beam.PCollection, conn connection.Settings) error {
	var convert any = fromProto
	if col.Type().Type() != pubSubMessageT {
		convert = fromPayload
	}
	_, err := sink.TryWrite(s, sink.Config{
		Topic:      model.TopicOf(project, topic),
		Connection: conn,
		// Beam's writer never creates a topic: a missing one fails the
		// bundle, naming it, rather than appear under a typo's name.
		CreateDisposition: sink.CreateNever,
		// Beam's messages may carry ordering keys, which the writer
		// publishes in order only with ordering enabled.
		Publisher: sink.PublisherOptions{EnableMessageOrdering: true},
	}, beam.ParDo(s, convert, col))
	return err
}

func payloadOf(m model.Message) []byte { return m.Data }

// protoOf is m as Beam's read with WithAttributes gives it.
func protoOf(m model.Message) *pubsubpb.PubsubMessage {
	return &pubsubpb.PubsubMessage{
		Data:        m.Data,
		Attributes:  m.Attributes,
		MessageId:   m.ID,
		PublishTime: timestamppb.New(m.PublishTime),
		OrderingKey: m.OrderingKey,
	}
}

func fromPayload(data []byte) model.Message { return model.Message{Data: data} }

func fromProto(m *pubsubpb.PubsubMessage) model.Message {
	return model.Message{Data: m.GetData(), Attributes: m.GetAttributes(), OrderingKey: m.GetOrderingKey()}
}
