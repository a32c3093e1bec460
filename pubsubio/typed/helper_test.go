package typed

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*order)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*customer)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*line)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*reading)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*node)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*pubsubpb.PubsubMessage)(nil)).Elem())
}

// TestMain runs the package's pipelines on Prism.
func TestMain(m *testing.M) {
	ptest.Main(m)
}

const testProject = "typed-project"

// order is the element type the Avro tests map orderSchema to: every
// mapping the package documents.
type order struct {
	ID       string `avro:"id"`
	Quantity int32  // "quantity", by name ignoring case
	Total    float64
	Paid     bool
	Weight   float32
	Big      int64            `avro:"big"`
	Note     *string          `avro:"note"`
	Tags     []string         `avro:"tags"`
	Prices   map[string]int64 `avro:"prices"`
	Status   string           `avro:"status"`
	Hash     [4]byte          `avro:"hash"`
	Blob     []byte           `avro:"blob"`
	At       time.Time        `avro:"at"`
	Day      time.Time        `avro:"day"`
	Elapsed  time.Duration    `avro:"elapsed"`
	Customer customer         `avro:"customer"`
	Previous *customer        `avro:"previous"`
	Lines    []line           `avro:"lines"`
	Local    string           `avro:"-"`
}

type customer struct {
	Name  string
	Since *time.Time
}

type line struct {
	SKU  string `avro:"sku"`
	Hash []byte `avro:"hash"`
}

// orderSchema has a field order lacks ("extra", with a default), and
// names its types across namespaces.
const orderSchema = `{
  "type": "record", "name": "Order", "namespace": "com.example",
  "fields": [
    {"name": "id", "type": "string"},
    {"name": "quantity", "type": "int"},
    {"name": "total", "type": "double"},
    {"name": "paid", "type": "boolean"},
    {"name": "weight", "type": "float"},
    {"name": "big", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "prices", "type": {"type": "map", "values": "long"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
    {"name": "blob", "type": "bytes"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "elapsed", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
      {"name": "name", "type": "string"},
      {"name": "since", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]}
    ]}},
    {"name": "previous", "type": ["null", "Customer"], "default": null},
    {"name": "lines", "type": {"type": "array", "items": {
      "type": "record", "name": "Line", "namespace": "com.example.lines",
      "fields": [{"name": "sku", "type": "string"}, {"name": "hash", "type": "com.example.Hash"}]}}},
    {"name": "extra", "type": "string", "default": "x"}
  ]
}`

func sampleOrder() order {
	note := "leave at the door"
	since := time.UnixMicro(1700000000123456).UTC()
	return order{
		ID: "o-1", Quantity: -3, Total: 12.5, Paid: true, Weight: 1.25, Big: 1 << 40,
		Note: &note, Tags: []string{"a", "b"}, Prices: map[string]int64{"x": 1, "y": -2},
		Status: "PAID", Hash: [4]byte{1, 2, 3, 4}, Blob: []byte{0, 0xff, 'z'},
		At:       time.UnixMilli(1716700000123).UTC(),
		Day:      time.Date(2024, 5, 26, 0, 0, 0, 0, time.UTC),
		Elapsed:  90 * time.Second,
		Customer: customer{Name: "Ada", Since: &since},
		Previous: &customer{Name: "Bob"},
		Lines:    []line{{SKU: "s1", Hash: []byte{9, 9, 9, 9}}},
	}
}

// reading is the element type of the pipeline tests: small, and coded by
// Beam's schema coder.
type reading struct {
	Sensor string  `json:"sensor"`
	Value  float64 `json:"value"`
	Unit   *string `json:"unit,omitempty"`
}

// readingSchema is revision 1 of the readings' schema; readingSchemaV2
// adds a unit.
const (
	readingSchema   = `{"type": "record", "name": "Reading", "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]}`
	readingSchemaV2 = `{"type": "record", "name": "Reading", "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}, {"name": "unit", "type": ["null", "string"], "default": null}]}`
)

var readingType = reflect.TypeOf(reading{})

// fakeSchemas is pstest with its schema service, and a count of the
// GetSchema calls it answered.
type fakeSchemas struct {
	srv  *pstest.Server
	conn connection.Settings
	gets *callCount
}

// callCount counts the calls a pstest reactor sees, and can fail them.
type callCount struct {
	n    chan struct{}
	fail error
}

func (c *callCount) React(any) (bool, any, error) {
	c.n <- struct{}{}
	if c.fail != nil {
		return true, nil, c.fail
	}
	return false, nil, nil
}

func (c *callCount) count() int { return len(c.n) }

func newFakeSchemas(t *testing.T) *fakeSchemas {
	t.Helper()
	gets := &callCount{n: make(chan struct{}, 1000)}
	srv := pstest.NewServer(pstest.ServerReactorOption{FuncName: "GetSchema", Reactor: gets})
	t.Cleanup(func() { srv.Close() })
	return &fakeSchemas{srv: srv, conn: connection.Settings{EmulatorEndpoint: srv.Addr}, gets: gets}
}

// schema creates the schema id with the revisions given, oldest first,
// and returns the ID of each.
func (f *fakeSchemas) schema(t *testing.T, id string, typ pubsubpb.Schema_Type, definitions ...string) []string {
	t.Helper()
	ctx := context.Background()
	name := "projects/" + testProject + "/schemas/" + id
	sc, err := f.srv.GServer.CreateSchema(ctx, &pubsubpb.CreateSchemaRequest{
		Parent: "projects/" + testProject, SchemaId: id, Schema: &pubsubpb.Schema{Type: typ, Definition: definitions[0]},
	})
	if err != nil {
		t.Fatalf("creating schema %s: %v", id, err)
	}
	revs := []string{sc.RevisionId}
	for _, d := range definitions[1:] {
		sc, err := f.srv.GServer.CommitSchema(ctx, &pubsubpb.CommitSchemaRequest{Name: name, Schema: &pubsubpb.Schema{Type: typ, Definition: d}})
		if err != nil {
			t.Fatalf("committing to schema %s: %v", id, err)
		}
		revs = append(revs, sc.RevisionId)
	}
	return revs
}

// topic creates a topic with the schema id (none when empty) and encoding.
func (f *fakeSchemas) topic(t *testing.T, id, schemaID string, enc pubsubpb.Encoding) model.Topic {
	t.Helper()
	topic := model.TopicOf(testProject, id)
	pt := &pubsubpb.Topic{Name: topic.String()}
	if schemaID != "" {
		pt.SchemaSettings = &pubsubpb.SchemaSettings{Schema: schemaName(schemaID), Encoding: enc}
	}
	if _, err := f.srv.GServer.CreateTopic(context.Background(), pt); err != nil {
		t.Fatalf("creating topic %s: %v", id, err)
	}
	return topic
}

func schemaName(id string) string { return "projects/" + testProject + "/schemas/" + id }

// schemaMessage is a message as Pub/Sub delivers it from a topic with the
// schema id: with the schema attributes Pub/Sub sets.
func schemaMessage(id, schemaID, rev string, enc Encoding, data []byte) model.Message {
	return model.Message{
		ID: id, Data: data, PublishTime: time.UnixMilli(1716700000000),
		Subscription: model.SubscriptionOf(testProject, "readings-sub"),
		Attributes: map[string]string{
			SchemaNameAttribute: schemaName(schemaID), SchemaRevisionAttribute: rev, SchemaEncodingAttribute: string(enc), "site": "north",
		},
	}
}

// wantError fails t unless err is an error containing every one of want.
func wantError(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one containing %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", what, err, w)
		}
	}
}

// resetRevisions empties the process-wide revision cache, so that a test
// sees its own fetches.
func resetRevisions(t *testing.T) {
	t.Helper()
	revisions.mu.Lock()
	defer revisions.mu.Unlock()
	revisions.entries = nil
	revisions.lru.Init()
}

// decoderFor is a decoding DoFn's core for cfg, set up against its
// server, torn down with the test.
func decoderFor(t *testing.T, cfg DecodeConfig, elem reflect.Type) (*decodeCore, error) {
	t.Helper()
	cfg, err := cfg.withDefaults(elem)
	if err != nil {
		t.Fatal(err)
	}
	c := &decodeCore{Cfg: cfg, Type: beam.EncodedType{T: elem}}
	t.Cleanup(func() { c.Teardown() })
	return c, c.Setup(context.Background())
}

// avroPayload writes native with schema.
func avroPayload(t *testing.T, schema string, native map[string]any, enc Encoding) []byte {
	t.Helper()
	c, err := newAvroCodec(schema, reflect.TypeOf(struct{}{}), decoding, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.write(native, enc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encoderSetup runs the Setup of an encoding DoFn's core for cfg, against
// f, and tears it down: the topic check.
func encoderSetup(t *testing.T, f *fakeSchemas, cfg EncodeConfig, elem reflect.Type) error {
	t.Helper()
	cfg.Connection = f.conn
	cfg, err := cfg.withDefaults(elem)
	if err != nil {
		t.Fatal(err)
	}
	c := &encodeCore{Cfg: cfg, Type: beam.EncodedType{T: elem}}
	defer c.Teardown()
	return c.Setup(context.Background())
}

// counterValue is the pipeline's total of the counter name in pubsubio's
// namespace.
func counterValue(res beam.PipelineResult, name string) int64 {
	var total int64
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == metrics.Namespace && c.Name() == name {
			total += c.Result()
		}
	}
	return total
}
