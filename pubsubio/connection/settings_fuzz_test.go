package connection

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// endpointOK restates what an emulator endpoint must be, without the
// package's code: host:port with no scheme, a non-empty host of host-name
// or IP-address characters (brackets only around the whole host, as
// net.SplitHostPort strips them) of at most 253 bytes, whose labels, unless
// it is an IPv6 address, are 1 to 63 characters, and a decimal port from 1
// to 65535.
func endpointOK(ep string) bool {
	i := strings.LastIndexByte(ep, ':')
	if i < 0 || strings.Contains(ep, "://") {
		return false
	}
	host, port := ep[:i], ep[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") {
		return false // an IPv6 address needs brackets to carry a port
	}
	if host == "" || port == "" { // leading zeros are fine: "000001" is port 1, to Validate and to Go's dialer
		return false
	}
	for _, c := range []byte(port) {
		if c < '0' || c > '9' {
			return false
		}
	}
	if n, _ := strconv.Atoi(port); n < 1 || n > 65535 {
		return false
	}
	for _, c := range []byte(host) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-_:%", c) >= 0) {
			return false
		}
	}
	if len(host) > 253 {
		return false
	}
	if !strings.Contains(host, ":") {
		for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
			if label == "" || len(label) > 63 {
				return false
			}
		}
	}
	return true
}

// credentialsRepresentatives holds one setting of each kind notAPath
// refuses.
var credentialsRepresentatives = []string{
	" ", "{", "-----BEGIN", "gs://k", "/" + strings.Repeat("a", maxPathBytes), "/a\n", "e30=",
}

// canonicalCredentials keeps only what Validate may judge a CredentialsFile
// by: whether it is set and which kind of non-path it is. Everything else
// in it is a path, which no error may depend on.
func canonicalCredentials(t *testing.T, path string) string {
	if path == "" {
		return ""
	}
	why := notAPath(path)
	if why == "" {
		return "/canonical/key.json"
	}
	for _, r := range credentialsRepresentatives {
		if notAPath(r) == why {
			return r
		}
	}
	t.Fatalf("CredentialsFile %q is refused as one that %s, a kind credentialsRepresentatives lacks", path, why)
	return ""
}

// FuzzSettingsValidate: Validate never panics; it accepts exactly the
// endpoints endpointOK accepts; an error for a bad endpoint names the option
// and quotes the value; no error depends on CredentialsFile's text beyond
// the kind of non-path it is, so it can echo none of the path; and an accepted
// emulator endpoint is one Dial can build a connection to, so nothing
// Validate lets through at graph construction fails later on the worker for
// its syntax.
func FuzzSettingsValidate(f *testing.F) {
	for _, s := range []Settings{
		{},
		{EmulatorEndpoint: "localhost:8085"},
		{EmulatorEndpoint: "127.0.0.1:1"},
		{EmulatorEndpoint: "[::1]:65535"},
		{EmulatorEndpoint: "[fe80::1%eth0]:8085"},
		{EmulatorEndpoint: "host%zz:8085"},
		{EmulatorEndpoint: "localhost:0"},
		{EmulatorEndpoint: "localhost:08085"},
		{EmulatorEndpoint: "http://localhost:8085"},
		{EmulatorEndpoint: "::1:8085"},
		{EmulatorEndpoint: "[a]b:1"},
		{EmulatorEndpoint: ":8085"},
		{EmulatorEndpoint: "local..host:8085"},
		{EmulatorEndpoint: "user:secret@localhost:8085"},
		{EmulatorEndpoint: "@"},
		{EmulatorEndpoint: strings.Repeat("a", 300) + ":8085"},
		{EmulatorEndpoint: "localhost:8085", CredentialsFile: "/secrets/sa.json"},
		{CredentialsFile: " {\"type\": \"service_account\"}"},
		{CredentialsFile: "/secrets/team-a/pubsub-key.json"},
		{CredentialsFile: "\ufeff{}"},
		{CredentialsFile: "eyJ0eXBlIjogInNlcnZpY2VfYWNjb3VudCJ9"},
		{CredentialsFile: "https://example.com/key.json"},
		{CredentialsFile: "/secrets/key.json\r"},
	} {
		f.Add(s.EmulatorEndpoint, s.CredentialsFile)
	}
	f.Fuzz(func(t *testing.T, endpoint, credentials string) {
		s := Settings{EmulatorEndpoint: endpoint, CredentialsFile: credentials}
		err := s.Validate()
		canon := Settings{EmulatorEndpoint: endpoint, CredentialsFile: canonicalCredentials(t, credentials)}
		if cerr := canon.Validate(); (err == nil) != (cerr == nil) || err != nil && err.Error() != cerr.Error() {
			t.Fatalf("Validate's verdict depends on CredentialsFile's text:\n %+v: %v\n %+v: %v", s, err, canon, cerr)
		}

		epValid := endpoint == "" || endpointOK(endpoint)
		epErr := Settings{EmulatorEndpoint: endpoint}.Validate()
		if epValid != (epErr == nil) {
			t.Fatalf("Validate(EmulatorEndpoint %q) = %v, but by the rules valid=%v", endpoint, epErr, epValid)
		}
		if epErr != nil {
			for _, want := range []string{"EmulatorEndpoint", quoteEndpoint(endpoint)} {
				if !strings.Contains(epErr.Error(), want) {
					t.Fatalf("error for EmulatorEndpoint %q lacks %s: %v", endpoint, want, epErr)
				}
			}
			return
		}
		if endpoint == "" {
			return
		}
		// grpc.NewClient only parses the target; nothing is dialled until an
		// RPC, so this stays off the network.
		conn, err := Dial(context.Background(), Settings{EmulatorEndpoint: endpoint})
		if err != nil {
			t.Fatalf("Validate accepted EmulatorEndpoint %q but Dial fails: %v", endpoint, err)
		}
		defer conn.Close()
		// What gRPC's resolver is handed is the URL path of the target.
		u, err := url.Parse(conn.Target())
		if err != nil {
			t.Fatalf("Dial(%q) targets %q, which is not a URL: %v", endpoint, conn.Target(), err)
		}
		if u.Scheme != "dns" || u.Host != "" || u.Path != "/"+endpoint {
			t.Fatalf("Dial(%q) targets %q, which gRPC resolves as scheme %q, endpoint %q, not the endpoint", endpoint, conn.Target(), u.Scheme, u.Path)
		}
	})
}
