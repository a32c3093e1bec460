package sink

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var messageType = reflect.TypeOf(model.Message{})

// Write publishes msgs, a PCollection<model.Message>, and returns the dead
// letters, a PCollection<dlq.FailedMessage> that holds something only
// under PolicyDeadLetter. It panics on an invalid configuration; TryWrite
// returns the error.
func Write(s beam.Scope, cfg Config, msgs beam.PCollection) beam.PCollection {
	out, err := TryWrite(s, cfg, msgs)
	if err != nil {
		panic(err)
	}
	return out
}

// TryWrite is Write returning the construction error instead of panicking.
func TryWrite(s beam.Scope, cfg Config, msgs beam.PCollection) (beam.PCollection, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return beam.PCollection{}, err
	}
	if !msgs.IsValid() {
		return beam.PCollection{}, fmt.Errorf("pubsubio.Write: the input PCollection is not valid")
	}
	if t := msgs.Type().Type(); t != messageType {
		return beam.PCollection{}, fmt.Errorf("pubsubio.Write: the input is a PCollection<%v>, not PCollection<pubsubio.Message>; convert it with MessagesFromBytes or MessagesFromStrings, or a ParDo of your own", t)
	}
	s = s.Scope("pubsubio.Write")
	out, err := beam.TryParDo(s, &writeFn{Cfg: cfg}, msgs)
	if err != nil {
		return beam.PCollection{}, fmt.Errorf("pubsubio.Write: %w", err)
	}
	return deadLetterOutput(s, out[0]), nil
}
