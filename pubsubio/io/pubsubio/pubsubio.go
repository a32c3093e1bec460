package pubsubio

import (
	"fmt"
	"reflect"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
)

// ReadOptions represents options for reading from PubSub.
type ReadOptions struct {
	Topic              string // Topic sets the topic to be read from. A new subscription will be generated for the job. Mutually exclusive with setting a Subscription.
	Subscription       string // Subscription sets the name of an existing subscription to read from. Mutually exclusive with setting a Topic.
	IDAttribute        string
	TimestampAttribute string
	WithAttributes     bool
}

// Read reads an unbounded number of PubSubMessages from the given
// pubsub topic or subscription. It produces an unbounded PCollecton<*PubSubMessage>,
// if WithAttributes is set, or an unbounded PCollection<[]byte>.
//
// The topic or subscription is required and must be set with ReadOptions.
//
// Here it runs on every runner: see the package documentation for what
// each option does and the flags that say where to connect. It panics on
// a configuration pubsubio refuses, naming the option.
func Read(s beam.Scope, project string, opts ReadOptions) beam.PCollection {
	s = s.Scope("pubsubio.Read")
	if (opts.Topic == "") == (opts.Subscription == "") {
		panic("Exactly one of Topic or Subscription must be set in ReadOptions")
	}
	isNative, err := native("pubsubio.Read")
	if err != nil {
		panic(err)
	}
	if isNative {
		return readNative(s, project, opts)
	}
	out, err := readPortable(s, project, opts, settings())
	if err != nil {
		panic(err)
	}
	return out
}

var pubSubMessageT = reflect.TypeOf((*pubsubpb.PubsubMessage)(nil))

// Write writes PubSubMessages or []bytes to the given pubsub topic.
// Panics if the input pcollection type is not one of those two types.
//
// When given []bytes, they are first wrapped in PubSubMessages.
//
// Here it runs on every runner, in batch pipelines too, and a bundle
// commits only once Pub/Sub confirmed its messages; as with Beam's
// package, a topic that does not exist is not created: the bundle fails,
// naming it. It panics on a configuration pubsubio refuses, naming the
// option.
func Write(s beam.Scope, project, topic string, col beam.PCollection) {
	s = s.Scope("pubsubio.Write")
	if t := col.Type().Type(); t != reflectx.ByteSlice && t != pubSubMessageT {
		panic(fmt.Sprintf("pubsubio.Write only accepts PCollections of %v and %v, received %v", pubSubMessageT, reflectx.ByteSlice, t))
	}
	isNative, err := native("pubsubio.Write")
	if err != nil {
		panic(err)
	}
	if isNative {
		if col.Type().Type() == reflectx.ByteSlice {
			col = beam.ParDo(s, wrapInMessage, col)
		}
		writeNative(s, project, topic, col)
		return
	}
	if err := writePortable(s, project, topic, col, settings()); err != nil {
		panic(err)
	}
}
