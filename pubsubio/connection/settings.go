package connection

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
)

// Settings says where and as whom to connect. Its fields are plain exported
// values because it is embedded in DoFn structs that Beam serializes as JSON.
// The zero value means production Pub/Sub with application-default
// credentials.
type Settings struct {
	// EmulatorEndpoint is the host:port of a Pub/Sub emulator, reached over
	// plaintext gRPC without credentials. Empty means production Pub/Sub.
	// The PUBSUB_EMULATOR_HOST environment variable is ignored: only this
	// field selects an emulator.
	EmulatorEndpoint string
	// CredentialsFile is the path of a service-account JSON key, read on the
	// machine where the client is built (the worker). Empty means
	// application-default credentials. It is serialized into the pipeline
	// graph, so anything that is not plausibly a path (inline JSON, PEM,
	// base64, a URL) is refused at construction; the key must be a regular
	// file naming Google's token endpoint. It cannot be combined with
	// EmulatorEndpoint.
	CredentialsFile string
	// MonitoringEndpoint is the host:port of a Cloud Monitoring stand-in
	// beside EmulatorEndpoint, reached over plaintext gRPC without
	// credentials: the read samples its subscriptions' backlog there
	// (source.Config.Backlog). Against production Pub/Sub the read samples
	// Cloud Monitoring itself, as the same identity, so it is set only with
	// EmulatorEndpoint; empty with an emulator means no backlog samples.
	// Write ignores it. README, Backlog.
	MonitoringEndpoint string
	// RPCTimeout bounds each call the connector makes on its own behalf:
	// describing, creating and seeking subscriptions, acking and nacking by
	// RPC, creating topics. The client retries within it; the connector
	// logs every 10 s while it waits and then fails the step naming the
	// call and the endpoint, so a wrong endpoint is an error, not a hang.
	// Publishing has its own sink.PublisherOptions.Timeout. If zero,
	// DefaultRPCTimeout (1 min) is used; 1 s to 10 min.
	RPCTimeout time.Duration
}

// Validate checks what can be known at graph construction: the endpoint's
// syntax, that an emulator and a key file are not both set, and that
// CredentialsFile looks like a path. The key file
// itself is read only on the worker, where it has to exist. Errors name the
// option and, for EmulatorEndpoint, the value; never the credentials path,
// which can reveal more than it should once it is in a log.
func (s Settings) Validate() error {
	var errs []error
	if s.EmulatorEndpoint != "" {
		if err := checkEndpoint(s.EmulatorEndpoint); err != nil {
			errs = append(errs, err)
		}
		if s.CredentialsFile != "" {
			errs = append(errs, errors.New("EmulatorEndpoint and CredentialsFile are both set: the emulator is reached in plaintext without credentials, so a key would go unused or be exposed; set CredentialsFile only for production Pub/Sub"))
		}
	}
	errs = append(errs, s.validateMonitoring()...)
	errs = append(errs, construct.CheckBounds(construct.Bound[time.Duration]{
		Option: "RPCTimeout", Value: s.RPCTimeout, Min: time.Second, Max: 10 * time.Minute, Zero: "for DefaultRPCTimeout (1 min)",
	})...)
	if s.CredentialsFile != "" {
		// Checked here because the graph, and the setting with it, is about
		// to be serialized: by the time the worker fails to open it, key
		// material would already be in the job's description.
		if why := notAPath(s.CredentialsFile); why != "" {
			errs = append(errs, fmt.Errorf("CredentialsFile %s, not the path of a key file: it must be a path present on the workers, because the setting is serialized into the pipeline graph", why))
		}
	}
	return errors.Join(errs...)
}

// maxQuotedEndpoint bounds how much of an endpoint an error quotes: more
// than any valid one.
const maxQuotedEndpoint = 300

// quoteEndpoint is ep quoted for an error: its userinfo, which may hold a
// password, replaced by "…", and at most maxQuotedEndpoint bytes of it.
func quoteEndpoint(ep string) string {
	if at := strings.LastIndex(ep, "@"); at >= 0 {
		scheme := ""
		if i := strings.Index(ep[:at], "://"); i >= 0 {
			scheme = ep[:i+3]
		}
		ep = scheme + "…@" + ep[at+1:]
	}
	return strconv.Quote(text.Truncate(ep, maxQuotedEndpoint))
}

// maxPathBytes is Linux's PATH_MAX.
const maxPathBytes = 4096

// notAPath says what p holds if it is not plausibly a file path, "" if it
// is: key material pasted where its path belongs (JSON, behind a byte-order
// mark or not; PEM; the base64 of either), a URL, a blank, or something no
// file system names. It never quotes p.
func notAPath(p string) string {
	trimmed := strings.TrimSpace(strings.TrimPrefix(p, "\ufeff"))
	switch {
	case trimmed == "":
		return "is blank (leave it empty for application-default credentials)"
	case strings.HasPrefix(trimmed, "{"):
		return "holds inline JSON"
	case strings.Contains(p, "-----BEGIN"):
		return "holds a PEM block"
	case strings.Contains(p, "://"):
		return "is a URL (it is read from the worker's file system)"
	case len(p) > maxPathBytes:
		return fmt.Sprintf("is longer than %d bytes", maxPathBytes)
	case strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }) || !utf8.ValidString(p):
		return "holds control characters or invalid UTF-8"
	case encodesKey(trimmed):
		return "holds base64-encoded key material"
	}
	return ""
}

// encodesKey reports whether s is base64 (standard or URL, padded or not)
// of key material, the way CI systems store a key: a JSON object (behind a
// byte-order mark or not), a PEM block, or the DER a PEM body holds (a PEM
// body pasted without its armour). No path decodes to these: a path with a
// '.' is not base64 at all.
func encodesKey(s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		t := strings.TrimSpace(strings.TrimPrefix(string(b), "\ufeff"))
		if strings.HasPrefix(t, "{") || strings.Contains(t, "-----BEGIN") || isDERSequence(b) {
			return true
		}
	}
	return false
}

// isDERSequence reports whether b starts like an ASN.1 DER SEQUENCE with a
// long-form length, as every private key and certificate does (base64
// "MII..."); 64 bytes at least, so that a short path never matches.
func isDERSequence(b []byte) bool {
	return len(b) >= 64 && b[0] == 0x30 && b[1]&0x80 != 0
}

// checkEndpoint accepts host:port with a non-empty host and a port in
// 1..65535. A scheme is rejected rather than stripped: "https://" would
// suggest TLS, which an emulator connection never uses.
// A host name's limits (RFC 1035): 253 bytes, dot-separated labels of 1 to
// 63 characters.
const (
	maxHostBytes  = 253
	maxLabelBytes = 63
)

func checkEndpoint(ep string) error {
	if strings.Contains(ep, "://") {
		return fmt.Errorf("EmulatorEndpoint %s has a scheme (the emulator is always reached over plaintext gRPC); use host:port, e.g. localhost:8085", quoteEndpoint(ep))
	}
	return CheckHostPort("EmulatorEndpoint", ep, "localhost:8085")
}

// CheckHostPort says why ep, the value of option, is not a host:port (a
// host name or an IP address, and a port from 1 to 65535), suggesting
// example; or returns nil.
func CheckHostPort(option, ep, example string) error {
	bad := func(why string) error {
		return fmt.Errorf("%s %s %s; use host:port, e.g. %s", option, quoteEndpoint(ep), why, example)
	}
	if strings.Contains(ep, "@") {
		return bad("has userinfo (user@ or user:password@); credentials never go in an endpoint, only in a key file or application-default credentials")
	}
	if strings.Contains(ep, "://") {
		return bad("has a scheme")
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		why := "is not host:port"
		if ae := (*net.AddrError)(nil); errors.As(err, &ae) {
			why += " (" + ae.Err + ")"
		}
		return bad(why)
	}
	if host == "" {
		return bad("has no host")
	}
	for _, r := range host {
		// Host names, IPv4 and (bracket-stripped) IPv6 addresses with zones.
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_:%", r)) {
			return bad(fmt.Sprintf("has the character %q in its host", r))
		}
	}
	if len(host) > maxHostBytes {
		return bad(fmt.Sprintf("has a host of %d bytes, over a host name's %d", len(host), maxHostBytes))
	}
	if !strings.Contains(host, ":") { // a name or an IPv4 address, not IPv6
		for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
			if label == "" || len(label) > maxLabelBytes {
				return bad(fmt.Sprintf("has a host with an empty label or one over %d characters", maxLabelBytes))
			}
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return bad(fmt.Sprintf("has port %q; the port must be a number from 1 to 65535", port))
	}
	return nil
}
