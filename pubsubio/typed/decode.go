package typed

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

type (
	emitValue      = func(beam.X)
	emitKeyed      = func(model.Message, beam.X)
	emitDeadLetter = func(dlq.FailedMessage)
)

func init() {
	register.DoFn4x1[context.Context, model.Message, emitValue, emitDeadLetter, error](&decodeFn{})
	register.DoFn4x1[context.Context, model.Message, emitKeyed, emitDeadLetter, error](&decodeKeepFn{})
	register.Emitter1[beam.X]()
	register.Emitter2[model.Message, beam.X]()
	register.Emitter1[dlq.FailedMessage]()
}

var messageType = reflect.TypeOf(model.Message{})

// Decode turns msgs, a PCollection<pubsubio.Message>, into values, a
// PCollection<T> of the element type t (a PCollection<KV<Message, T>>
// under cfg.KeepMessage), each at its message's event time, and returns
// with them the dead letters, a PCollection<dlq.FailedMessage> of the
// messages that did not decode under DecodePolicy DecodeDeadLetter (stage
// decode). It panics on an invalid configuration; TryDecode returns the
// error.
func Decode(s beam.Scope, cfg DecodeConfig, t reflect.Type, msgs beam.PCollection) (values, deadLetters beam.PCollection) {
	values, deadLetters, err := TryDecode(s, cfg, t, msgs)
	if err != nil {
		panic(err)
	}
	return values, deadLetters
}

// TryDecode is Decode returning the construction error instead of
// panicking.
func TryDecode(s beam.Scope, cfg DecodeConfig, t reflect.Type, msgs beam.PCollection) (values, deadLetters beam.PCollection, err error) {
	cfg, err = cfg.withDefaults(t)
	if err != nil {
		return beam.PCollection{}, beam.PCollection{}, err
	}
	if err := construct.CheckInput("pubsubio.Decode", msgs, messageType, "pubsubio.Message", "pass what pubsubio.Read returns"); err != nil {
		return beam.PCollection{}, beam.PCollection{}, err
	}
	core := decodeCore{Cfg: cfg, Type: beam.EncodedType{T: t}}
	var fn any = &decodeFn{core}
	if cfg.KeepMessage {
		fn = &decodeKeepFn{core}
	}
	out, err := beam.TryParDo(s.Scope("pubsubio.Decode"), fn, msgs, beam.TypeDefinition{Var: beam.XType, T: t})
	if err != nil {
		return beam.PCollection{}, beam.PCollection{}, fmt.Errorf("pubsubio.Decode: %w", err)
	}
	return out[0], out[1], nil
}

// decodeFn emits each value alone.
type decodeFn struct{ decodeCore }

func (fn *decodeFn) ProcessElement(ctx context.Context, m model.Message, emit emitValue, dead emitDeadLetter) error {
	v, err := fn.decode(ctx, m)
	if err != nil {
		return fn.fail(ctx, m, err, dead)
	}
	emit(v)
	return nil
}

// decodeKeepFn emits each value with its message, whose Data the value
// holds.
type decodeKeepFn struct{ decodeCore }

func (fn *decodeKeepFn) ProcessElement(ctx context.Context, m model.Message, emit emitKeyed, dead emitDeadLetter) error {
	v, err := fn.decode(ctx, m)
	if err != nil {
		return fn.fail(ctx, m, err, dead)
	}
	m.Data = nil
	emit(m, v)
	return nil
}

// decodeCore is what both decoding DoFns do. Cfg and Type are what Beam
// serializes. The codec decodes messages that name no schema revision; the
// schema service is dialed when Topic is checked or a revision is first
// fetched.
type decodeCore struct {
	Cfg  DecodeConfig
	Type beam.EncodedType
	prepared
}

func (c *decodeCore) Setup(ctx context.Context) error {
	return c.prepare(ctx, c.Cfg.payload(), c.Type.T, decoding)
}

// unavailable is a schema revision that could not be fetched this time:
// the bundle fails, whatever the DecodePolicy, so that an outage of the
// schema service never sends a stream to the dead letters.
type unavailable struct{ err error }

func (u *unavailable) Error() string { return u.err.Error() }
func (u *unavailable) Unwrap() error { return u.err }

// decode returns m's value: in the encoding m's attributes name, else
// Encoding; for model.FormatAvro with the schema revision they name, else the
// configured schema.
func (c *decodeCore) decode(ctx context.Context, m model.Message) (any, error) {
	enc := c.Cfg.Encoding
	if a, ok := m.Attributes[SchemaEncodingAttribute]; ok {
		enc = Encoding(a)
		if enc != EncodingBinary && enc != EncodingJSON {
			return nil, fmt.Errorf("attribute %s is %q, neither %s nor %s", SchemaEncodingAttribute, a, EncodingBinary, EncodingJSON)
		}
	}
	cd := c.codec
	if name, rev := m.Attributes[SchemaNameAttribute], m.Attributes[SchemaRevisionAttribute]; c.Cfg.Format == model.FormatAvro && name != "" && rev != "" {
		var err error
		if cd, err = c.revision(ctx, name, rev); err != nil {
			return nil, err
		}
	}
	return cd.decode(m.Data, enc)
}

// revision returns the codec of a schema revision, from the process-wide
// cache or the schema service.
func (c *decodeCore) revision(ctx context.Context, name, rev string) (codec, error) {
	revision, err := revisionName(name, rev)
	if err != nil {
		return nil, err
	}
	k := revisionKey{endpoint: c.Cfg.Connection.Endpoint(), revision: revision, t: c.Type.T}
	cd, transient, err := revisions.get(ctx, k, func(ctx context.Context) (*avroCodec, bool, error) {
		return c.fetch(ctx, revision)
	})
	if transient {
		return nil, &unavailable{err}
	}
	if err != nil {
		return nil, err
	}
	return cd, nil
}

// fetch reads a revision and plans the element type for it. A revision
// that does not exist, is not Avro, has a record that contains itself or
// does not fit the type is a lasting error: every message naming it fails
// to decode, and none of their payloads is read.
func (c *decodeCore) fetch(ctx context.Context, revision string) (*avroCodec, bool, error) {
	svc, err := c.svc.get(ctx, c.Cfg.Connection, "pubsubio.Decode")
	if err != nil {
		return nil, true, err
	}
	sc, err := svc.schema(ctx, revision)
	if err != nil {
		if lasting(err) {
			return nil, false, fmt.Errorf("schema revision %s cannot be read: %w", revision, err)
		}
		return nil, true, fmt.Errorf("fetching schema revision %s: %w", revision, err)
	}
	revisionsFetched.Inc(ctx, 1)
	if got := sc.GetType(); got != schemaTypes[model.FormatAvro] {
		return nil, false, fmt.Errorf("schema revision %s is a %s schema, not Avro", revision, got)
	}
	cd, err := newAvroCodec(sc.GetDefinition(), c.Type.T, decoding, true)
	if err != nil {
		return nil, false, fmt.Errorf("schema revision %s: %w", revision, err)
	}
	return cd, false, nil
}

// fail routes m, which did not decode, per DecodePolicy; it returns the
// error that fails the bundle, if any.
func (c *decodeCore) fail(ctx context.Context, m model.Message, err error, dead emitDeadLetter) error {
	if u := (*unavailable)(nil); errors.As(err, &u) {
		return fmt.Errorf("pubsubio.Decode: %s: %w; the bundle fails so that it is decoded once the schema service answers", describe(m), err)
	}
	decodeFailures.Inc(ctx, 1)
	switch c.Cfg.DecodePolicy {
	case model.DecodeDrop:
		return nil
	case model.DecodeDeadLetter:
		f := dlq.New(dlq.StageDecode, m, fmt.Errorf("pubsubio.Decode: %s: %w", describe(m), err), m.DeliveryAttempt, time.Now())
		f.Subscription = m.Subscription
		dead(f)
		return nil
	}
	return fmt.Errorf("pubsubio.Decode: %s cannot be decoded as %s, so the bundle fails and the read gives the message back for redelivery: fix the publisher, or set DecodePolicy %s or %s: %w",
		describe(m), c.Cfg.Format, model.DecodeDrop, model.DecodeDeadLetter, err)
}

// describe names m for an error: its ID and subscription, when it has them.
func describe(m model.Message) string {
	if m.Subscription.IsZero() {
		return fmt.Sprintf("message %q", m.ID)
	}
	return fmt.Sprintf("message %q from %s", m.ID, m.Subscription)
}
