package sink

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.Function1x1(bytesToMessage)
	register.Function1x1(stringToMessage)
}

func bytesToMessage(b []byte) model.Message  { return model.Message{Data: b} }
func stringToMessage(s string) model.Message { return model.Message{Data: []byte(s)} }

// FromBytes turns a PCollection<[]byte> into a PCollection<model.Message>
// with each element as the payload, for the default topic.
func FromBytes(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("pubsubio.MessagesFromBytes"), bytesToMessage, col)
}

// FromStrings turns a PCollection<string> into a PCollection<model.Message>
// with each element, UTF-8 encoded, as the payload, for the default topic.
func FromStrings(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("pubsubio.MessagesFromStrings"), stringToMessage, col)
}
