package connection

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"google.golang.org/api/option"
	gtransport "google.golang.org/api/transport/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// ProductionEndpoint is the Pub/Sub endpoint used when no EmulatorEndpoint is
// set: the apiv1 clients' default.
const ProductionEndpoint = "pubsub.googleapis.com:443"

// Why a connection dialed here, and not options, defeats PUBSUB_EMULATOR_HOST:
// apiv1's emulator hook (emulator_hook.go) runs inside every New*Client and,
// when the variable is set, adds option.WithEndpoint(addr), an insecure
// transport and option.WithoutAuthentication. Options passed by the caller
// are applied after the hook's, so WithEndpoint could override the address,
// but no option undoes WithoutAuthentication or removes the insecure dial
// option: production RPCs would go out in plaintext without credentials
// (the hook also skips the settings validation that would report the
// conflict). option.WithGRPCConn, in contrast, short-circuits the
// transport: gtransport.DialPool returns the given connection
// (&singleConnPool{o.GRPCConn}) before looking at endpoint, credentials or
// dial options, so the hook's options have nothing left to act on.
// pubsub.NewClientWithConfig also reads the variable, only to decide whether
// to add a connection pool and a keepalive; both are dial options, ignored
// with WithGRPCConn, which is why the keepalive is set here instead.

// Dial opens the gRPC connection that s describes: plaintext without
// credentials to s.EmulatorEndpoint, or TLS with credentials to
// ProductionEndpoint. PUBSUB_EMULATOR_HOST is never consulted.
//
// Pass the connection to cloud.google.com/go/pubsub/v2 or its apiv1 clients
// with option.WithGRPCConn, as their only transport option. The caller owns
// it: closing any client built on it closes it.
//
// extra dial options are added to the connection (the source records what
// its streaming pulls receive with an interceptor).
func Dial(ctx context.Context, s Settings, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.EmulatorEndpoint != "" {
		return dialPlaintext("EmulatorEndpoint", s.EmulatorEndpoint, extra)
	}
	return dialProduction(ctx, s, "Pub/Sub", ProductionEndpoint, vkit.DefaultAuthScopes(), extra)
}

// maxRecv is what apiv1 sets as a default dial option, which WithGRPCConn
// skips: without it a streaming-pull response over gRPC's 4 MiB default
// is rejected.
var maxRecv = grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32))

// dialPlaintext connects to endpoint, the value of option, over plaintext
// gRPC without credentials.
func dialPlaintext(option, endpoint string, extra []grpc.DialOption) (*grpc.ClientConn, error) {
	// "dns:///" keeps a host that happens to be a gRPC scheme name
	// ("unix:8085") from being read as one. gRPC parses the target as a
	// URL, so the "%" of an IPv6 zone ("[fe80::1%eth0]:8085"), which
	// Validate accepts, is escaped; the resolver gets it back unescaped.
	conn, err := grpc.NewClient("dns:///"+strings.ReplaceAll(endpoint, "%", "%25"),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), maxRecv}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", option, endpoint, err)
	}
	return conn, nil
}

// dialProduction connects to service at endpoint over TLS, with s's
// credentials and scopes.
func dialProduction(ctx context.Context, s Settings, service, endpoint string, scopes []string, extra []grpc.DialOption) (*grpc.ClientConn, error) {
	opts := []option.ClientOption{
		option.WithEndpoint(endpoint),
		option.WithScopes(scopes...),
		// The keepalive pubsub.NewClientWithConfig would add for production:
		// pinging a quiet connection every 5 minutes notices a dead one and
		// redials, rather than leaving a streaming pull waiting forever.
		option.WithGRPCDialOption(grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Minute})),
		option.WithGRPCDialOption(maxRecv),
	}
	for _, o := range extra {
		opts = append(opts, option.WithGRPCDialOption(o))
	}
	if s.CredentialsFile != "" {
		key, err := readServiceAccountKey(s.CredentialsFile)
		if err != nil {
			return nil, err
		}
		// The key is passed as bytes, not as the path, so the library can
		// neither reread a file that changed since the check nor put the
		// path in its errors.
		opts = append(opts, option.WithAuthCredentialsJSON(option.ServiceAccount, key))
	}
	conn, err := gtransport.Dial(ctx, opts...)
	if err != nil {
		if s.CredentialsFile == "" {
			return nil, fmt.Errorf("connecting to %s with application-default credentials: %w; set CredentialsFile or configure application-default credentials on the workers", service, err)
		}
		return nil, fmt.Errorf("connecting to %s with CredentialsFile: %w", service, err)
	}
	return conn, nil
}

// NewClient builds a *pubsub.Client for project over a connection from Dial.
// Closing the client closes the connection.
func NewClient(ctx context.Context, project string, s Settings, extra ...grpc.DialOption) (*pubsub.Client, error) {
	conn, err := Dial(ctx, s, extra...)
	if err != nil {
		return nil, err
	}
	c, err := pubsub.NewClient(ctx, project, option.WithGRPCConn(conn))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("creating Pub/Sub client for project %q: %w", project, err)
	}
	return c, nil
}
