package typed

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// The attributes Pub/Sub sets on every message published to a topic with
// a schema: the schema's name, the revision the message was validated
// against, and its encoding. Publishers cannot set them: Pub/Sub reserves
// attribute keys starting with "goog" and refuses them from a publisher,
// as pubsubio.Write does. The emulator accepts them, and on a topic with a
// schema replaces them with its own; pstest neither refuses nor sets them.
const (
	SchemaNameAttribute     = "googclient_schemaname"
	SchemaRevisionAttribute = "googclient_schemarevisionid"
	SchemaEncodingAttribute = "googclient_schemaencoding"
)

// deletedSchema is what a topic's schema settings name once its schema
// was deleted.
const deletedSchema = "_deleted-schema_"

// maxRevisions bounds how many revisions the topic check lists: Pub/Sub
// keeps at most 20 per schema.
const maxRevisions = 100

// schemaService is the few calls Decode and Encode make on their own
// behalf: a topic's schema settings, a schema revision, the revisions of a
// schema. It connects as pubsubio's reads and writes do (connection.Dial,
// which ignores PUBSUB_EMULATOR_HOST), and every call runs under
// connection.Settings.Call: a deadline, and a log line while it waits.
type schemaService struct {
	settings connection.Settings
	api      string // "pubsubio.Decode" or "pubsubio.Encode"
	conn     *grpc.ClientConn
	topics   *vkit.TopicAdminClient
	schemas  *vkit.SchemaClient
}

// dialSchemaService connects for api, which names the calls in their
// logs and errors; its own errors leave the prefix to its caller.
func dialSchemaService(ctx context.Context, settings connection.Settings, api string) (*schemaService, error) {
	conn, err := connection.Dial(ctx, settings)
	if err != nil {
		return nil, fmt.Errorf("connecting to the schema service: %w", err)
	}
	s := &schemaService{settings: settings, api: api, conn: conn}
	if s.topics, err = vkit.NewTopicAdminClient(ctx, option.WithGRPCConn(conn)); err == nil {
		s.schemas, err = vkit.NewSchemaClient(ctx, option.WithGRPCConn(conn))
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("creating the schema service's clients: %w", err)
	}
	return s, nil
}

func (s *schemaService) topic(ctx context.Context, t model.Topic) (desc *pubsubpb.Topic, err error) {
	err = s.settings.Call(ctx, s.api, "GetTopic "+t.String(), func(ctx context.Context) error {
		desc, err = s.topics.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: t.String()})
		return err
	})
	return desc, err
}

// schema returns a schema with its definition: name is
// "projects/P/schemas/S" for its newest revision, or with "@REVISION".
func (s *schemaService) schema(ctx context.Context, name string) (sc *pubsubpb.Schema, err error) {
	err = s.settings.Call(ctx, s.api, "GetSchema "+name, func(ctx context.Context) error {
		sc, err = s.schemas.GetSchema(ctx, &pubsubpb.GetSchemaRequest{Name: name, View: pubsubpb.SchemaView_FULL})
		return err
	})
	return sc, err
}

// revisions returns the revisions of the schema name, with definitions.
func (s *schemaService) revisions(ctx context.Context, name string) (out []*pubsubpb.Schema, err error) {
	err = s.settings.Call(ctx, s.api, "ListSchemaRevisions "+name, func(ctx context.Context) error {
		out = out[:0]
		it := s.schemas.ListSchemaRevisions(ctx, &pubsubpb.ListSchemaRevisionsRequest{Name: name, View: pubsubpb.SchemaView_FULL})
		for len(out) < maxRevisions {
			sc, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return nil
			}
			if err != nil {
				return err
			}
			out = append(out, sc)
		}
		return nil
	})
	return out, err
}

// lazyService is a DoFn's schema service, dialed on first use: a DoFn
// that needs no schema never connects.
type lazyService struct{ svc *schemaService }

func (l *lazyService) get(ctx context.Context, settings connection.Settings, api string) (*schemaService, error) {
	if l.svc == nil {
		svc, err := dialSchemaService(ctx, settings, api)
		if err != nil {
			return nil, err
		}
		l.svc = svc
	}
	return l.svc, nil
}

// close closes the connection both clients share (closing each client
// would close it twice).
func (l *lazyService) close() error {
	if l.svc == nil {
		return nil
	}
	err := l.svc.conn.Close()
	l.svc = nil
	return err
}

// revisionIDPattern is what a revision ID a message names may be before
// it goes into a schema revision's resource name. Pub/Sub documents no
// format (its examples, the emulator's IDs and pstest's are 8 lowercase
// hexadecimal digits, "c7cfa2a8"), so the pattern accepts more: 1 to 64
// letters, digits, '_' and '-', enough for an ID of another shape, and
// nothing ('/', '@', '.') that would name another resource.
var revisionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// maxQuotedAttribute bounds how much of an attribute value an error quotes.
const maxQuotedAttribute = 300

// revisionName returns the revision a message's schema attributes name,
// "projects/P/schemas/S@R", or why they name none.
func revisionName(name, rev string) (string, error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || parts[2] != "schemas" || parts[3] == "" || strings.Contains(name, "@") {
		return "", fmt.Errorf("attribute %s is %q, not a schema name (projects/PROJECT/schemas/SCHEMA)", SchemaNameAttribute, text.Truncate(name, maxQuotedAttribute))
	}
	if !revisionIDPattern.MatchString(rev) {
		return "", fmt.Errorf("attribute %s is %q, not a revision ID", SchemaRevisionAttribute, text.Truncate(rev, maxQuotedAttribute))
	}
	return name + "@" + rev, nil
}

// lasting reports whether the schema service's answer err will not change
// on a retry: the revision does not exist, or cannot.
func lasting(err error) bool {
	c := status.Code(err)
	return c == codes.NotFound || c == codes.InvalidArgument
}
