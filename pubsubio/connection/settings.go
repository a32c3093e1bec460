package connection

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
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
	// application-default credentials. It cannot be combined with
	// EmulatorEndpoint.
	CredentialsFile string
}

// Validate checks what can be known at graph construction: the endpoint's
// syntax, and that an emulator and a key file are not both set. The key file
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
	if strings.HasPrefix(strings.TrimSpace(s.CredentialsFile), "{") {
		// Checked here because the graph, and so the key, is about to be
		// serialized; by the time the worker fails to open it, it is too late.
		errs = append(errs, errors.New("CredentialsFile holds inline JSON: it must be the path of a service-account key file present on the workers, because the setting is serialized into the pipeline graph"))
	}
	return errors.Join(errs...)
}

// checkEndpoint accepts host:port with a non-empty host and a port in
// 1..65535. A scheme is rejected rather than stripped: "https://" would
// suggest TLS, which an emulator connection never uses.
func checkEndpoint(ep string) error {
	bad := func(why string) error {
		return fmt.Errorf("EmulatorEndpoint %q %s; use host:port, e.g. localhost:8085", ep, why)
	}
	if strings.Contains(ep, "://") {
		return bad("has a scheme (the emulator is always reached over plaintext gRPC)")
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
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return bad(fmt.Sprintf("has port %q; the port must be a number from 1 to 65535", port))
	}
	return nil
}
