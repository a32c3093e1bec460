package typed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Messages naming a revision are read with it, in the encoding they name;
// each revision is fetched once per process however many DoFns read it.
func TestDecodeWithRevisions(t *testing.T) {
	resetRevisions(t)
	f := newFakeSchemas(t)
	revs := f.schema(t, "readings", pubsubpb.Schema_AVRO, readingSchema, readingSchemaV2)
	cfg := DecodeConfig{Format: model.FormatAvro, AvroSchema: readingSchemaV2, Connection: f.conn}
	unit := "°C"
	v1 := schemaMessage("1", "readings", revs[0], EncodingBinary, avroPayload(t, readingSchema, map[string]any{"sensor": "a", "value": 1.0}, EncodingBinary))
	v2 := schemaMessage("2", "readings", revs[1], EncodingJSON, avroPayload(t, readingSchemaV2, map[string]any{"sensor": "b", "value": 2.0, "unit": map[string]any{"string": unit}}, EncodingJSON))
	for i := range 2 { // two DoFn instances, sharing the cache
		c, err := decoderFor(t, cfg, readingType)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			m    model.Message
			want reading
		}{{v1, reading{Sensor: "a", Value: 1}}, {v2, reading{Sensor: "b", Value: 2, Unit: &unit}}} {
			got, err := c.decode(context.Background(), tc.m)
			if err != nil {
				t.Fatalf("instance %d, message %s: %v", i, tc.m.ID, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("instance %d, message %s (-want +got):\n%s", i, tc.m.ID, diff)
			}
		}
	}
	if n := f.gets.count(); n != 2 {
		t.Errorf("GetSchema was called %d times for 2 revisions read by 2 DoFns", n)
	}
}

// A revision that cannot be read is a decode failure of its messages,
// remembered; one the service could not give now is not.
func TestDecodeRevisionFailures(t *testing.T) {
	resetRevisions(t)
	f := newFakeSchemas(t)
	avroRevs := f.schema(t, "readings", pubsubpb.Schema_AVRO, readingSchema, `{"type":"record","name":"Reading","fields":[{"name":"sensor","type":"long"}]}`)
	protoRevs := f.schema(t, "protos", pubsubpb.Schema_PROTOCOL_BUFFER, `syntax = "proto3"; message Reading { string sensor = 1; }`)
	c, err := decoderFor(t, DecodeConfig{Format: model.FormatAvro, AvroSchema: readingSchemaV2, Connection: f.conn}, readingType)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	payload := avroPayload(t, readingSchema, map[string]any{"sensor": "a", "value": 1.0}, EncodingBinary)
	for _, tc := range []struct {
		name string
		m    model.Message
		want []string
	}{
		{"deleted revision", schemaMessage("1", "readings", "deadbeef", EncodingBinary, payload), []string{"projects/typed-project/schemas/readings@deadbeef cannot be read", "NotFound"}},
		{"a Protocol Buffer schema", schemaMessage("2", "protos", protoRevs[0], EncodingBinary, payload), []string{"is a PROTOCOL_BUFFER schema, not Avro"}},
		{"a revision the type does not fit", schemaMessage("3", "readings", avroRevs[1], EncodingBinary, payload), []string{"@" + avroRevs[1], "typed.reading.Sensor is a string, but Avro long"}},
		{"a malformed name", schemaMessage("4", "readings/x", avroRevs[0], EncodingBinary, payload), []string{SchemaNameAttribute, "not a schema name"}},
		{"a malformed revision", schemaMessage("5", "readings", "a/b", EncodingBinary, payload), []string{SchemaRevisionAttribute, `"a/b"`}},
		{"an unknown encoding", schemaMessage("6", "readings", avroRevs[0], "XML", payload), []string{SchemaEncodingAttribute, `"XML"`}},
		{"the payload of another revision", schemaMessage("7", "readings", avroRevs[0], EncodingJSON, payload), []string{"not a record Reading in Avro's JSON encoding"}},
	} {
		_, err := c.decode(ctx, tc.m)
		wantError(t, tc.name, err, tc.want...)
		if u := (*unavailable)(nil); errors.As(err, &u) {
			t.Errorf("%s: %v is taken for an outage", tc.name, err)
		}
	}
	before := f.gets.count()
	if _, err := c.decode(ctx, schemaMessage("8", "readings", "deadbeef", EncodingBinary, payload)); err == nil || f.gets.count() != before {
		t.Errorf("a missing revision was fetched again (%d calls, then %d): %v", before, f.gets.count(), err)
	}

	// The client retries UNAVAILABLE until Connection.RPCTimeout.
	resetRevisions(t)
	conn := f.conn
	conn.RPCTimeout = time.Second
	if c, err = decoderFor(t, DecodeConfig{Format: model.FormatAvro, AvroSchema: readingSchemaV2, Connection: conn}, readingType); err != nil {
		t.Fatal(err)
	}
	f.gets.fail = status.Error(codes.Unavailable, "the schema service is down")
	_, err = c.decode(ctx, schemaMessage("9", "readings", avroRevs[0], EncodingBinary, payload))
	if u := (*unavailable)(nil); !errors.As(err, &u) || !strings.Contains(err.Error(), "got no answer within Connection.RPCTimeout 1s") {
		t.Fatalf("an unavailable schema service: %v, want an outage", err)
	}
	f.gets.fail = nil
	if got, err := c.decode(ctx, schemaMessage("10", "readings", avroRevs[0], EncodingBinary, payload)); err != nil || got.(reading).Sensor != "a" {
		t.Errorf("after the outage: %v, %v; the failed fetch was remembered", got, err)
	}
}

// A revision whose records contain themselves makes its messages decode
// failures, remembered like any revision that cannot serve, and its
// payloads are never read: 10 MB of 0x02 is a list of five million nodes,
// which goavro would read five million calls deep, past the stack's limit.
func TestDecodeRecursiveRevision(t *testing.T) {
	resetRevisions(t)
	f := newFakeSchemas(t)
	flat := `{"type": "record", "name": "Node", "namespace": "com.example", "fields": [{"name": "value", "type": "long"}]}`
	revs := f.schema(t, "nodes", pubsubpb.Schema_AVRO, flat, nodeSchema)
	c, err := decoderFor(t, DecodeConfig{Format: model.FormatAvro, AvroSchema: flat, DecodePolicy: model.DecodeDeadLetter, Connection: f.conn}, nodeType)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deep := bytes.Repeat([]byte{0x02}, 10<<20)
	for i := range 2 {
		_, err := c.decode(ctx, schemaMessage(fmt.Sprint(i), "nodes", revs[1], EncodingBinary, deep))
		wantError(t, "a message naming the recursive revision", err, "schema revision projects/typed-project/schemas/nodes@"+revs[1], "record com.example.Node, which contains it")
		if u := (*unavailable)(nil); errors.As(err, &u) {
			t.Errorf("%v is taken for an outage", err)
		}
	}
	if n := f.gets.count(); n != 1 {
		t.Errorf("GetSchema was called %d times for the recursive revision, want once", n)
	}
	got, err := c.decode(ctx, schemaMessage("2", "nodes", revs[0], EncodingBinary, []byte{0x02}))
	if err != nil || got != (node{Value: 1}) {
		t.Errorf("a message naming the flat revision: %v, %v", got, err)
	}
	// A topic whose schema's newest revision is the recursive one: Setup
	// refuses it.
	topic := f.topic(t, "nodes", "nodes", pubsubpb.Encoding_BINARY)
	_, err = decoderFor(t, DecodeConfig{Format: model.FormatAvro, Topic: topic, Connection: f.conn}, nodeType)
	wantError(t, "the topic's schema", err, "pubsubio.Decode: schema projects/typed-project/schemas/nodes@"+revs[1]+" of Topic "+topic.String(), "record com.example.Node, which contains it")
}

// The revision cache holds at most its bound, dropping the least recently
// used.
func TestRevisionCacheBound(t *testing.T) {
	c := &revisionCache{max: 2}
	fetches := 0
	get := func(rev string) {
		_, _, err := c.get(context.Background(), revisionKey{revision: rev}, func(context.Context) (*avroCodec, bool, error) {
			fetches++
			return &avroCodec{}, false, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, rev := range []string{"a", "b", "a", "c", "a", "b"} {
		get(rev)
	}
	// a, b fetched; a hit; c evicts b; a hit; b fetched again, evicting c.
	if fetches != 4 || len(c.entries) != 2 || c.lru.Len() != 2 {
		t.Errorf("%d fetches, %d entries, %d in LRU order; want 4, 2, 2", fetches, len(c.entries), c.lru.Len())
	}
}

// Concurrent misses for one revision share one fetch: the fetch holds
// until every other caller is waiting for it, then answers them all.
func TestRevisionCacheSharesAFetch(t *testing.T) {
	const callers = 8
	c := &revisionCache{max: 4}
	waiting := make(chan struct{}, callers)
	ctx := waitingContext{Context: context.Background(), waiting: waiting}
	var fetches atomic.Int32
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cd, _, err := c.get(ctx, revisionKey{revision: "r"}, func(context.Context) (*avroCodec, bool, error) {
				fetches.Add(1)
				deadline := time.After(10 * time.Second)
				for n := 0; n < callers-1; n++ {
					select {
					case <-waiting:
					case <-deadline:
						t.Errorf("after 10 s, %d of the %d other callers wait for the fetch", n, callers-1)
						return &avroCodec{record: "R"}, false, nil
					}
				}
				return &avroCodec{record: "R"}, false, nil
			})
			if err != nil || cd.record != "R" {
				t.Errorf("got %v, %v", cd, err)
			}
		}()
	}
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches for one revision", n)
	}
}

// waitingContext reports on waiting each time its Done is asked for:
// revisionCache.get asks for it only to wait for a fetch in flight.
type waitingContext struct {
	context.Context
	waiting chan<- struct{}
}

func (c waitingContext) Done() <-chan struct{} {
	c.waiting <- struct{}{}
	return c.Context.Done()
}

// The topic check, before the first message: every mismatch is named with
// the topic, its schema and encoding.
func TestTopicCheck(t *testing.T) {
	f := newFakeSchemas(t)
	avroRevs := f.schema(t, "readings", pubsubpb.Schema_AVRO, readingSchema, readingSchemaV2)
	f.schema(t, "protos", pubsubpb.Schema_PROTOCOL_BUFFER, `syntax = "proto3"; message PubsubMessage { bytes data = 1; }`)
	avroBinary := f.topic(t, "avro-binary", "readings", pubsubpb.Encoding_BINARY)
	protoJSON := f.topic(t, "proto-json", "protos", pubsubpb.Encoding_JSON)
	plain := f.topic(t, "plain", "", 0)
	const described = "Topic projects/typed-project/topics/avro-binary has schema projects/typed-project/schemas/readings (AVRO, encoding BINARY), which does not match"
	enc := func(cfg EncodeConfig, elem reflect.Type) error { return encoderSetup(t, f, cfg, elem) }
	for _, tc := range []struct {
		name string
		cfg  EncodeConfig
		elem reflect.Type
		want []string
	}{
		{"protobuf to an Avro topic", EncodeConfig{Format: model.FormatProtobuf, Topic: avroBinary}, pubsubMessageType, []string{described, "Format PROTOBUF does not read or write AVRO schemas"}},
		{"plain JSON to an Avro topic", EncodeConfig{Format: model.FormatJSON, Topic: avroBinary}, readingType, []string{described, "Format JSON is plain JSON", "Encoding JSON"}},
		{"the wrong encoding", EncodeConfig{Format: model.FormatProtobuf, Topic: protoJSON}, pubsubMessageType, []string{"(PROTOCOL_BUFFER, encoding JSON)", "Encoding is BINARY, the topic's JSON"}},
		{"an Avro schema that is no revision", EncodeConfig{Format: model.FormatAvro, Topic: avroBinary, AvroSchema: orderSchema}, orderType, []string{described, "AvroSchema is none of the 2 revisions of the schema the topic accepts (every revision"}},
		{"the topic's schema does not fit the type", EncodeConfig{Format: model.FormatAvro, Topic: avroBinary}, orderType, []string{"pubsubio.Encode: schema projects/typed-project/schemas/readings@" + avroRevs[1] + " of Topic projects/typed-project/topics/avro-binary", "typed.order.ID"}},
		{"Avro to a topic without a schema, no AvroSchema", EncodeConfig{Format: model.FormatAvro, Topic: plain}, readingType, []string{"Topic projects/typed-project/topics/plain has no schema", "set AvroSchema"}},
		{"a missing topic", EncodeConfig{Format: model.FormatJSON, Topic: model.TopicOf(testProject, "missing")}, readingType, []string{"Topic projects/typed-project/topics/missing does not exist"}},
	} {
		wantError(t, tc.name, enc(tc.cfg, tc.elem), append(tc.want, "pubsubio.Encode: ")...)
	}
	for _, tc := range []struct {
		name string
		cfg  EncodeConfig
		elem reflect.Type
	}{
		{"Avro, the topic's newest revision", EncodeConfig{Format: model.FormatAvro, Topic: avroBinary}, readingType},
		{"Avro, an older revision given", EncodeConfig{Format: model.FormatAvro, Topic: avroBinary, AvroSchema: readingSchemaV2}, readingType},
		{"Protobuf JSON", EncodeConfig{Format: model.FormatProtobuf, Encoding: EncodingJSON, Topic: protoJSON}, pubsubMessageType},
		{"anything to a topic without a schema", EncodeConfig{Format: model.FormatJSON, Topic: plain}, readingType},
	} {
		if err := enc(tc.cfg, tc.elem); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Decoding with the topic's schema: its newest revision, or the one
	// the topic's settings end at.
	if _, err := f.srv.GServer.UpdateTopic(context.Background(), &pubsubpb.UpdateTopicRequest{
		Topic:      &pubsubpb.Topic{Name: avroBinary.String(), SchemaSettings: &pubsubpb.SchemaSettings{Schema: schemaName("readings"), Encoding: pubsubpb.Encoding_BINARY, LastRevisionId: avroRevs[0]}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"schema_settings"}},
	}); err != nil {
		t.Fatal(err)
	}
	_, err := decoderFor(t, DecodeConfig{Format: model.FormatAvro, Topic: avroBinary, Connection: f.conn}, readingType)
	wantError(t, "a topic ending at revision 1, which lacks reading.Unit", err, "readings@"+avroRevs[0], "typed.reading.Unit")
}

// readingSchemaV3 adds a site, with a default, to readingSchemaV2.
const readingSchemaV3 = `{"type": "record", "name": "Reading", "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"},
  {"name": "unit", "type": ["null", "string"], "default": null}, {"name": "site", "type": "string", "default": ""}]}`

// Encode's AvroSchema must be a revision the topic accepts: from its
// FirstRevisionId to its LastRevisionId, as pstest keeps them.
func TestTopicCheckRevisionRange(t *testing.T) {
	f := newFakeSchemas(t)
	revs := f.schema(t, "readings", pubsubpb.Schema_AVRO, readingSchema, readingSchemaV2, readingSchemaV3)
	topic := f.topic(t, "ranged", "readings", pubsubpb.Encoding_BINARY)
	bound := func(first, last string) {
		t.Helper()
		if _, err := f.srv.GServer.UpdateTopic(context.Background(), &pubsubpb.UpdateTopicRequest{
			Topic:      &pubsubpb.Topic{Name: topic.String(), SchemaSettings: &pubsubpb.SchemaSettings{FirstRevisionId: first, LastRevisionId: last}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"schema_settings.first_revision_id", "schema_settings.last_revision_id"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	enc := func(schema string) error {
		return encoderSetup(t, f, EncodeConfig{Format: model.FormatAvro, Topic: topic, AvroSchema: schema}, readingType)
	}
	bound(revs[2], "")
	wantError(t, "revision 2, the topic accepting 3 on", enc(readingSchemaV2),
		"AvroSchema is revision "+revs[1]+" of the schema, but the topic accepts revisions from FirstRevisionId "+revs[2]+" on")
	if err := enc(readingSchemaV3); err != nil {
		t.Errorf("revision 3, the topic accepting 3 on: %v", err)
	}
	bound(revs[0], revs[1])
	wantError(t, "revision 3, the topic accepting 1 to 2", enc(readingSchemaV3),
		"AvroSchema is revision "+revs[2]+" of the schema, but the topic accepts revisions from FirstRevisionId "+revs[0]+" to LastRevisionId "+revs[1])
	if err := enc(readingSchemaV2); err != nil {
		t.Errorf("revision 2, the topic accepting 1 to 2: %v", err)
	}
	bound("gone1234", "")
	wantError(t, "a FirstRevisionId that is no revision", enc(readingSchemaV2), "the topic's FirstRevisionId gone1234 is none of the schema's 3 revisions")
}

// The range goes by creation time, whatever order the service lists the
// revisions in, both bounds included.
func TestRevisionRangeAccepted(t *testing.T) {
	rev := func(id string, minute int) *pubsubpb.Schema {
		return &pubsubpb.Schema{RevisionId: id, RevisionCreateTime: timestamppb.New(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC))}
	}
	revs := []*pubsubpb.Schema{rev("e", 5), rev("d", 4), rev("c", 3), rev("b", 2), rev("a", 1)} // newest first
	for _, tc := range []struct {
		r    revisionRange
		want string
	}{
		{revisionRange{}, "edcba"},
		{revisionRange{first: "c"}, "edc"},
		{revisionRange{last: "b"}, "ba"},
		{revisionRange{first: "b", last: "d"}, "dcb"},
		{revisionRange{first: "c", last: "c"}, "c"},
		{revisionRange{first: "d", last: "b"}, ""},
	} {
		got, err := tc.r.accepted(revs)
		if err != nil {
			t.Fatalf("%s: %v", tc.r, err)
		}
		ids := ""
		for _, g := range got {
			ids += g.GetRevisionId()
		}
		if ids != tc.want {
			t.Errorf("%s: accepted %q, want %q", tc.r, ids, tc.want)
		}
	}
	if _, err := (revisionRange{last: "z"}).accepted(revs); err == nil || !strings.Contains(err.Error(), "LastRevisionId z is none of the schema's 5 revisions") {
		t.Errorf("a LastRevisionId that is no revision: %v", err)
	}
}

// An error carries its API's prefix once, when the schema service cannot
// be reached, whether at Setup or for a revision a message names.
func TestSchemaServiceErrorsPrefixedOnce(t *testing.T) {
	resetRevisions(t)
	conn := connection.Settings{CredentialsFile: filepath.Join(t.TempDir(), "missing-key.json")}
	once := func(what string, err error, api string) {
		t.Helper()
		wantError(t, what, err, "connecting to the schema service", "CredentialsFile cannot be read")
		if err != nil && strings.Count(err.Error(), api+":") != 1 {
			t.Errorf("%s: %q does not say %q exactly once", what, err, api+":")
		}
	}
	c, err := decoderFor(t, DecodeConfig{Format: model.FormatAvro, AvroSchema: readingSchemaV2, Connection: conn}, readingType)
	if err != nil {
		t.Fatal(err)
	}
	m := schemaMessage("1", "readings", "abcd1234", EncodingBinary, []byte{0})
	_, err = c.decode(context.Background(), m)
	once("a revision, unreachable", c.fail(context.Background(), m, err, func(dlq.FailedMessage) { t.Error("an outage was dead-lettered") }), "pubsubio.Decode")
	topic := model.TopicOf(testProject, "readings")
	_, err = decoderFor(t, DecodeConfig{Format: model.FormatJSON, Topic: topic, Connection: conn}, readingType)
	once("Decode's topic check, unreachable", err, "pubsubio.Decode")
	cfg, err := EncodeConfig{Format: model.FormatJSON, Topic: topic, Connection: conn}.withDefaults(readingType)
	if err != nil {
		t.Fatal(err)
	}
	e := &encodeCore{Cfg: cfg, Type: beam.EncodedType{T: readingType}}
	defer e.Teardown()
	once("Encode's topic check, unreachable", e.Setup(context.Background()), "pubsubio.Encode")
}

// A message's schema attributes name a revision only in the shapes
// revisionName documents.
func TestRevisionName(t *testing.T) {
	for _, rev := range []string{"c7cfa2a8", "0a0b0c0d", "Rev_2-b", strings.Repeat("a", 64)} {
		if got, err := revisionName(schemaName("s"), rev); err != nil || got != schemaName("s")+"@"+rev {
			t.Errorf("revision %q: %q, %v", rev, got, err)
		}
	}
	for _, rev := range []string{"", "a@b", "a/b", "../x", "a.b", strings.Repeat("a", 65)} {
		if _, err := revisionName(schemaName("s"), rev); err == nil {
			t.Errorf("revision %q was taken", rev)
		}
	}
}
