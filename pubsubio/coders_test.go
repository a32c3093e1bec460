package pubsubio_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// codedOrder is the user's type of the typed steps below. It has its own
// coder, so that every schema row left in the pipeline is the connector's.
type codedOrder struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

func encodeOrder(o codedOrder) ([]byte, error) { return json.Marshal(o) }

func decodeOrder(b []byte) (codedOrder, error) {
	var o codedOrder
	err := json.Unmarshal(b, &o)
	return o, err
}

func init() {
	beam.RegisterCoder(reflect.TypeOf((*codedOrder)(nil)).Elem(), encodeOrder, decodeOrder)
}

// rowCoder is the URN of Beam's schema coder. A Java runner (Flink)
// decodes a Go row with a nil slice or map in a non-nullable field and
// re-encodes it without the null bit Go wrote, so the next task misreads
// it ("java.io.IOException: varint overflow" in RowCoder): no value the
// connector hands the runner may use it.
const rowCoder = "beam:coder:row:v1"

// TestNoSchemaRows builds a pipeline with every transform of the connector
// (Read with dead letters, Deduplicate, Records, Decode with and without
// the message, Encode, Write, WriteDeadLetters) and fails on any schema
// row coder in its portable description: in a PCollection, a restriction,
// a key or a state.
func TestNoSchemaRows(t *testing.T) {
	conn := pubsubio.Connection{EmulatorEndpoint: "127.0.0.1:1"} // never dialled: the pipeline only gets built
	out := pubsubio.TopicOf("my-project", "output")

	p, s := beam.NewPipelineWithRoot()
	msgs, readFailures := pubsubio.ReadWithDeadLetters(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "input")},
		Connection:    conn,
	})
	deduped := pubsubio.Deduplicate(s, pubsubio.DedupConfig{}, msgs)
	_, recordFailures := pubsubio.Records(s, pubsubio.RecordConfig{Format: pubsubio.FormatJSON}, deduped)
	orders, decodeFailures := pubsubio.Decode(s, pubsubio.DecodeConfig{Format: pubsubio.FormatJSON}, reflect.TypeOf(codedOrder{}), msgs)
	kept, keptFailures := pubsubio.Decode(s, pubsubio.DecodeConfig{Format: pubsubio.FormatJSON, KeepMessage: true}, reflect.TypeOf(codedOrder{}), msgs)
	encoded, encodeFailures := pubsubio.Encode(s, pubsubio.EncodeConfig{Format: pubsubio.FormatJSON}, orders)
	reencoded, reencodeFailures := pubsubio.Encode(s, pubsubio.EncodeConfig{Format: pubsubio.FormatJSON}, kept)
	writeFailures := pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, FailurePolicy: pubsubio.PolicyDeadLetter, Connection: conn},
		beam.Flatten(s, deduped, encoded, reencoded))
	failures := beam.Flatten(s, readFailures, recordFailures, decodeFailures, keptFailures, encodeFailures, reencodeFailures, writeFailures)
	pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{Topic: pubsubio.TopicOf("my-project", "dead"), Connection: conn}, failures)
	pubsubio.Write(s, pubsubio.WriteConfig{Topic: out, Connection: conn}, pubsubio.Originals(s, failures))

	edges, _, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := graphx.Marshal(edges, &graphx.Options{Environment: &pipepb.Environment{Urn: "beam:env:docker:v1"}})
	if err != nil {
		t.Fatal(err)
	}
	coders := pb.GetComponents().GetCoders()
	var rows []string
	for id, c := range coders {
		if c.GetSpec().GetUrn() == rowCoder {
			rows = append(rows, id)
		}
	}
	sort.Strings(rows)
	for _, id := range rows {
		var users []string
		for pcID, pc := range pb.GetComponents().GetPcollections() {
			if usesCoder(coders, pc.GetCoderId(), id) {
				users = append(users, pcID)
			}
		}
		sort.Strings(users)
		t.Errorf("coder %s is a schema row (%s); PCollections using it: %v", id, rowCoder, users)
	}
	if len(rows) == 0 {
		t.Logf("%d coders, %d PCollections, no schema rows", len(coders), len(pb.GetComponents().GetPcollections()))
	}
}

// usesCoder reports whether coder id is, or has among its components,
// coder want.
func usesCoder(coders map[string]*pipepb.Coder, id, want string) bool {
	if id == want {
		return true
	}
	for _, c := range coders[id].GetComponentCoderIds() {
		if usesCoder(coders, c, want) {
			return true
		}
	}
	return false
}
