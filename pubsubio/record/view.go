package record

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

type (
	emitRecord     = func(string)
	emitDeadLetter = func(dlq.FailedMessage)
)

func init() {
	register.DoFn4x0[context.Context, model.Message, emitRecord, emitDeadLetter](&recordFn{})
	register.Emitter1[string]()
	register.Emitter1[dlq.FailedMessage]()
}

var messageType = reflect.TypeOf(model.Message{})

// decodeFailures counts payloads that did not hold the format.
var decodeFailures = beam.NewCounter(metrics.Namespace, "record_decode_failures")

// Records turns msgs, a PCollection<model.Message>, into records, a
// PCollection<string> of one JSON object each, and returns with them the
// dead letters, a PCollection<dlq.FailedMessage> of the messages whose
// payload does not hold cfg.Format (stage dlq.StageDecode; counted in
// record_decode_failures). Pass the dead letters to dlq.Write, or anywhere:
// they are the only trace of those messages. It panics on an invalid
// configuration; TryRecords returns the error.
func Records(s beam.Scope, cfg Config, msgs beam.PCollection) (records, deadLetters beam.PCollection) {
	records, deadLetters, err := TryRecords(s, cfg, msgs)
	if err != nil {
		panic(err)
	}
	return records, deadLetters
}

// TryRecords is Records returning the construction error instead of
// panicking.
func TryRecords(s beam.Scope, cfg Config, msgs beam.PCollection) (records, deadLetters beam.PCollection, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return beam.PCollection{}, beam.PCollection{}, err
	}
	if err := construct.CheckInput("pubsubio.Records", msgs, messageType, "pubsubio.Message", "pass what pubsubio.Read returns"); err != nil {
		return beam.PCollection{}, beam.PCollection{}, err
	}
	out, err := beam.TryParDo(s.Scope("pubsubio.Records"), &recordFn{Cfg: cfg}, msgs)
	if err != nil {
		return beam.PCollection{}, beam.PCollection{}, fmt.Errorf("pubsubio.Records: %w", err)
	}
	return out[0], out[1], nil
}

// recordFn is Records' DoFn; Cfg is what Beam serializes.
type recordFn struct {
	Cfg Config

	enc *Encoder
}

func (fn *recordFn) Setup() error {
	enc, err := NewEncoder(fn.Cfg)
	if err != nil {
		return err
	}
	fn.enc = enc
	return nil
}

func (fn *recordFn) ProcessElement(ctx context.Context, m model.Message, emit emitRecord, dead emitDeadLetter) {
	rec, err := fn.enc.Encode(m)
	if err == nil {
		emit(string(rec))
		return
	}
	f := dlq.New(dlq.StageDecode, m, fmt.Errorf("pubsubio.Records: message %q: %w", m.ID, err), m.DeliveryAttempt, time.Now())
	f.Subscription = m.Subscription
	decodeFailures.Inc(ctx, 1)
	dead(f)
}
