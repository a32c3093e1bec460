package typed

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/linkedin/goavro/v2"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// prepared is what a decoding or encoding DoFn builds in its Setup: its
// codec, and its connection to the schema service once it needs one.
type prepared struct {
	codec codec
	svc   lazyService
}

// prepare checks p.Topic's schema settings, if Topic is set, and builds
// the codec: for model.FormatAvro, with AvroSchema or the topic's schema.
func (pr *prepared) prepare(ctx context.Context, p payload, t reflect.Type, dir direction) error {
	cd, err := prepareCodec(ctx, &pr.svc, p, t, dir)
	pr.codec = cd
	return err
}

// Teardown closes the connection to the schema service, if one was made.
func (pr *prepared) Teardown() error { return pr.svc.close() }

// prepareCodec is the first step of a DoFn that decodes or encodes: it
// checks p.Topic's schema settings, if Topic is set, and returns the codec
// of p's format, for model.FormatAvro with AvroSchema or the topic's schema.
func prepareCodec(ctx context.Context, svc *lazyService, p payload, t reflect.Type, dir direction) (codec, error) {
	api := apiOf(dir)
	schema, from := p.AvroSchema, "AvroSchema"
	if !p.Topic.IsZero() {
		s, err := svc.get(ctx, p.Connection, api)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", api, err)
		}
		var topics string
		if schema, topics, err = checkTopic(ctx, s, p, dir); err != nil {
			return nil, err
		}
		if topics != "" {
			from = topics
		}
	}
	cd, err := newCodec(p.Format, t, schema, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", api, from, err)
	}
	return cd, nil
}

// apiOf is the prefix of dir's errors.
func apiOf(dir direction) string {
	if dir == encoding {
		return "pubsubio.Encode"
	}
	return "pubsubio.Decode"
}

// schemaTypes are the schema types each format reads and writes.
var schemaTypes = map[model.Format]pubsubpb.Schema_Type{
	model.FormatAvro:     pubsubpb.Schema_AVRO,
	model.FormatProtobuf: pubsubpb.Schema_PROTOCOL_BUFFER,
}

// checkTopic reads p.Topic's schema settings and returns why they do not
// match p, naming the topic, its schema and encoding, and every mismatch.
// For model.FormatAvro it also returns the writer's schema to use when none is
// configured, the newest revision the topic accepts, and from, which names
// that revision. When encoding, an
// AvroSchema given must be one of the schema's revisions that the topic
// accepts (revisionRange); when decoding
// it only serves messages that name no revision, which a topic with a
// schema does not carry.
func checkTopic(ctx context.Context, svc *schemaService, p payload, dir direction) (avroSchema, from string, err error) {
	topic, err := svc.topic(ctx, p.Topic)
	if status.Code(err) == codes.NotFound {
		return "", "", fmt.Errorf("%s: Topic %s does not exist; its schema settings are checked before the first message: create it, or leave Topic unset: %w", svc.api, p.Topic, err)
	}
	if err != nil {
		return "", "", fmt.Errorf("%s: reading the schema settings of Topic %s: %w", svc.api, p.Topic, err)
	}
	settings := topic.GetSchemaSettings()
	name := settings.GetSchema()
	switch name {
	case "":
		if p.Format == model.FormatAvro && p.AvroSchema == "" {
			return "", "", fmt.Errorf("%s: Topic %s has no schema to take the writer's Avro schema from: set AvroSchema", svc.api, p.Topic)
		}
		return p.AvroSchema, "", nil
	case deletedSchema:
		return "", "", fmt.Errorf("%s: the schema of Topic %s was deleted, so Pub/Sub refuses every publish to it: give the topic a schema, or remove its schema settings", svc.api, p.Topic)
	}
	revision := name
	if last := settings.GetLastRevisionId(); last != "" {
		revision += "@" + last
	}
	sc, err := svc.schema(ctx, revision)
	if err != nil {
		return "", "", fmt.Errorf("%s: reading schema %s of Topic %s: %w", svc.api, revision, p.Topic, err)
	}
	topicEncoding := strings.TrimPrefix(settings.GetEncoding().String(), "ENCODING_")
	var mismatch []string
	if want, ok := schemaTypes[p.Format]; !ok {
		mismatch = append(mismatch, fmt.Sprintf("Format %s is plain JSON, not the JSON encoding of an %s schema: use Format %s or %s with Encoding %s", p.Format, sc.GetType(), model.FormatAvro, model.FormatProtobuf, EncodingJSON))
	} else if sc.GetType() != want {
		mismatch = append(mismatch, fmt.Sprintf("Format %s does not read or write %s schemas", p.Format, sc.GetType()))
	}
	if p.Format != model.FormatJSON && topicEncoding != string(p.Encoding) {
		mismatch = append(mismatch, fmt.Sprintf("Encoding is %s, the topic's %s", p.Encoding, topicEncoding))
	}
	if len(mismatch) == 0 && p.Format == model.FormatAvro {
		if p.AvroSchema == "" {
			return sc.GetDefinition(), fmt.Sprintf("schema %s@%s of Topic %s", name, sc.GetRevisionId(), p.Topic), nil
		}
		if dir == decoding {
			return p.AvroSchema, "", nil
		}
		why, err := avroSchemaOf(ctx, svc, name, rangeOf(settings), p.AvroSchema)
		if err != nil {
			return "", "", fmt.Errorf("%s: listing the revisions of schema %s of Topic %s: %w", svc.api, name, p.Topic, err)
		}
		if why != "" {
			mismatch = append(mismatch, why)
		}
	}
	if len(mismatch) > 0 {
		return "", "", fmt.Errorf("%s: Topic %s has schema %s (%s, encoding %s), which does not match: %s",
			svc.api, p.Topic, revision, sc.GetType(), topicEncoding, strings.Join(mismatch, "; "))
	}
	return p.AvroSchema, "", nil
}

// avroSchemaOf returns why the Avro schema given is none of the revisions
// of the schema name that the topic accepts (accepted), compared in Avro's
// canonical form, or "".
func avroSchemaOf(ctx context.Context, svc *schemaService, name string, accepted revisionRange, given string) (string, error) {
	c, err := goavro.NewCodec(given)
	if err != nil { // checked at construction
		return "", err
	}
	revs, err := svc.revisions(ctx, name)
	if err != nil {
		return "", err
	}
	inRange, err := accepted.accepted(revs)
	if err != nil {
		return err.Error(), nil
	}
	same := func(r *pubsubpb.Schema) bool {
		rc, err := goavro.NewCodec(r.GetDefinition())
		return err == nil && rc.CanonicalSchema() == c.CanonicalSchema()
	}
	if slices.ContainsFunc(inRange, same) {
		return "", nil
	}
	var outside []string
	for _, r := range revs {
		if same(r) {
			outside = append(outside, r.GetRevisionId())
		}
	}
	if len(outside) > 0 {
		return fmt.Sprintf("AvroSchema is revision %s of the schema, but the topic accepts %s, so Pub/Sub would refuse what it writes", strings.Join(outside, " and "), accepted), nil
	}
	return fmt.Sprintf("AvroSchema is none of the %d revisions of the schema the topic accepts (%s; compared in Avro's canonical form), so Pub/Sub would refuse what it writes", len(inRange), accepted), nil
}
