package typed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/grpccode"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

type emitMessage = func(model.Message)

func init() {
	register.DoFn4x1[context.Context, beam.X, emitMessage, emitDeadLetter, error](&encodeFn{})
	register.DoFn5x1[context.Context, model.Message, beam.X, emitMessage, emitDeadLetter, error](&encodeKeepFn{})
	register.Emitter1[model.Message]()
}

// Encode turns values, a PCollection<T>, into messages, a
// PCollection<pubsubio.Message> for pubsubio.Write, each value the Data
// of one message, at the value's event time; and returns with them the
// dead letters, a PCollection<dlq.FailedMessage> of the values that could
// not be encoded under FailurePolicy PolicyDeadLetter (stage validate).
// Given a PCollection<KV<pubsubio.Message, T>> (what Decode emits under
// KeepMessage) it keeps each message's attributes, ordering key and topic
// and replaces its Data, dropping the schema attributes Pub/Sub sets
// itself. It panics on an invalid configuration; TryEncode returns the
// error.
func Encode(s beam.Scope, cfg EncodeConfig, values beam.PCollection) (msgs, deadLetters beam.PCollection) {
	msgs, deadLetters, err := TryEncode(s, cfg, values)
	if err != nil {
		panic(err)
	}
	return msgs, deadLetters
}

// TryEncode is Encode returning the construction error instead of
// panicking.
func TryEncode(s beam.Scope, cfg EncodeConfig, values beam.PCollection) (msgs, deadLetters beam.PCollection, err error) {
	api := apiOf(encoding)
	if !values.IsValid() {
		return beam.PCollection{}, beam.PCollection{}, construct.Invalid(api, errors.New("the input PCollection is not valid"))
	}
	ft := values.Type()
	t, keyed := ft.Type(), false
	if typex.IsKV(ft) {
		key, value := ft.Components()[0].Type(), ft.Components()[1].Type()
		if key != messageType {
			return beam.PCollection{}, beam.PCollection{}, construct.Invalid(api, fmt.Errorf("the input is a PCollection<KV<%v, %v>>; a KV input must be KV<pubsubio.Message, T>, as Decode emits under KeepMessage", key, value))
		}
		t, keyed = value, true
	}
	if cfg, err = cfg.withDefaults(t); err != nil {
		return beam.PCollection{}, beam.PCollection{}, err
	}
	core := encodeCore{Cfg: cfg, Type: beam.EncodedType{T: t}}
	var fn any = &encodeFn{core}
	if keyed {
		fn = &encodeKeepFn{core}
	}
	out, err := beam.TryParDo(s.Scope(api), fn, values)
	if err != nil {
		return beam.PCollection{}, beam.PCollection{}, fmt.Errorf("%s: %w", api, err)
	}
	return out[0], out[1], nil
}

// encodeFn makes each value the Data of a new message.
type encodeFn struct{ encodeCore }

func (fn *encodeFn) ProcessElement(ctx context.Context, v beam.X, emit emitMessage, dead emitDeadLetter) error {
	return fn.encode(ctx, model.Message{}, v, emit, dead)
}

// encodeKeepFn makes each value the Data of the message beside it.
type encodeKeepFn struct{ encodeCore }

func (fn *encodeKeepFn) ProcessElement(ctx context.Context, m model.Message, v beam.X, emit emitMessage, dead emitDeadLetter) error {
	return fn.encode(ctx, m, v, emit, dead)
}

// encodeCore is what both encoding DoFns do. Cfg and Type are what Beam
// serializes.
type encodeCore struct {
	Cfg  EncodeConfig
	Type beam.EncodedType
	prepared
}

func (c *encodeCore) Setup(ctx context.Context) error {
	return c.prepare(ctx, c.Cfg.payload(), c.Type.T, encoding)
}

// encode emits v as the Data of a message made from base, or routes v per
// FailurePolicy.
func (c *encodeCore) encode(ctx context.Context, base model.Message, v any, emit emitMessage, dead emitDeadLetter) error {
	data, err := c.codec.encode(v, c.Cfg.Encoding)
	out := model.Message{Data: data, Attributes: withoutSchemaAttributes(base.Attributes), OrderingKey: base.OrderingKey, Topic: base.Topic}
	if !c.Cfg.Topic.IsZero() {
		out.Topic = c.Cfg.Topic
	}
	if err == nil {
		emit(out)
		return nil
	}
	encodeFailures.Inc(ctx, 1)
	err = fmt.Errorf("pubsubio.Encode: a %v cannot be encoded as %s (encoding %s): %w", c.Type.T, c.Cfg.Format, c.Cfg.Encoding, err)
	switch c.Cfg.FailurePolicy {
	case model.PolicyDrop:
		log.Warnf(ctx, "%v; dropped under FailurePolicy %s", err, model.PolicyDrop)
		return nil
	case model.PolicyDeadLetter:
		out.Data = render(v)
		f := dlq.New(dlq.StageValidate, out, err, 0, time.Now())
		f.Topic, f.Code = out.Topic, grpccode.Name(codes.InvalidArgument)
		dead(f)
		return nil
	}
	return fmt.Errorf("%w; the bundle fails: fix the value, or set FailurePolicy %s or %s", err, model.PolicyDrop, model.PolicyDeadLetter)
}

// render is a value that could not be encoded, for a person to read in
// its dead letter: encoding/json's rendering, or fmt's where that fails
// too. It is not the payload the topic expects.
func render(v any) []byte {
	if b, err := json.Marshal(v); err == nil {
		return b
	}
	return fmt.Appendf(nil, "%+v", v)
}

// withoutSchemaAttributes returns attrs without the attributes Pub/Sub
// sets on a message to a topic with a schema: they describe the payload
// Encode replaces, and Pub/Sub refuses them from a publisher, as
// pubsubio.Write does.
func withoutSchemaAttributes(attrs map[string]string) map[string]string {
	_, name := attrs[SchemaNameAttribute]
	_, rev := attrs[SchemaRevisionAttribute]
	_, enc := attrs[SchemaEncodingAttribute]
	if !name && !rev && !enc {
		return attrs
	}
	out := maps.Clone(attrs)
	delete(out, SchemaNameAttribute)
	delete(out, SchemaRevisionAttribute)
	delete(out, SchemaEncodingAttribute)
	if len(out) == 0 {
		return nil
	}
	return out
}
