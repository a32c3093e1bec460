package pubsubio_test

import (
	"reflect"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/exec"

	_ "github.com/pubsubio/beam-pubsubio/pubsubio/io/pubsubio"
)

// The package registers the emitters its native DoFns use, as Beam's
// package does: marshalMessageFn emits []byte, unmarshalMessageFn and
// wrapInMessage *pb.PubsubMessage. Unregistered, a worker falls back to
// reflection for each of them.
func TestNativeEmittersRegistered(t *testing.T) {
	for _, emitter := range []reflect.Type{reflect.TypeFor[func([]byte)](), reflect.TypeFor[func(*pubsubpb.PubsubMessage)]()} {
		if !exec.IsEmitterRegistered(emitter) {
			t.Errorf("no emitter is registered for %v", emitter)
		}
	}
}
