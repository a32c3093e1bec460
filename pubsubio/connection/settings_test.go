package connection

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	const keyPath = "/secrets/team-a/pubsub-key.json"
	for _, tc := range []struct {
		name string
		s    Settings
		// want lists substrings the error must contain; nil means valid.
		want []string
	}{
		{name: "zero value", s: Settings{}},
		{name: "credentials file", s: Settings{CredentialsFile: keyPath}},
		{name: "localhost", s: Settings{EmulatorEndpoint: "localhost:8085"}},
		{name: "ipv4", s: Settings{EmulatorEndpoint: "127.0.0.1:1"}},
		{name: "ipv6", s: Settings{EmulatorEndpoint: "[::1]:65535"}},
		{name: "service name", s: Settings{EmulatorEndpoint: "pubsub-emulator.test_net:8085"}},

		{name: "no port", s: Settings{EmulatorEndpoint: "localhost"}, want: []string{"EmulatorEndpoint", `"localhost"`, "missing port"}},
		{name: "empty port", s: Settings{EmulatorEndpoint: "localhost:"}, want: []string{"EmulatorEndpoint", "1 to 65535"}},
		{name: "port 0", s: Settings{EmulatorEndpoint: "localhost:0"}, want: []string{"EmulatorEndpoint", `"localhost:0"`, "1 to 65535"}},
		{name: "port 70000", s: Settings{EmulatorEndpoint: "localhost:70000"}, want: []string{"EmulatorEndpoint", `"localhost:70000"`, "1 to 65535"}},
		{name: "port negative", s: Settings{EmulatorEndpoint: "localhost:-1"}, want: []string{"EmulatorEndpoint", "1 to 65535"}},
		{name: "port signed", s: Settings{EmulatorEndpoint: "localhost:+80"}, want: []string{"EmulatorEndpoint", "1 to 65535"}},
		{name: "port name", s: Settings{EmulatorEndpoint: "localhost:http"}, want: []string{"EmulatorEndpoint", `"localhost:http"`, "1 to 65535"}},
		{name: "empty host", s: Settings{EmulatorEndpoint: ":8085"}, want: []string{"EmulatorEndpoint", `":8085"`, "no host"}},
		{name: "http scheme", s: Settings{EmulatorEndpoint: "http://localhost:8085"}, want: []string{"EmulatorEndpoint", `"http://localhost:8085"`, "scheme"}},
		{name: "grpc scheme", s: Settings{EmulatorEndpoint: "dns:///localhost:8085"}, want: []string{"EmulatorEndpoint", "scheme"}},
		{name: "path", s: Settings{EmulatorEndpoint: "localhost/x:8085"}, want: []string{"EmulatorEndpoint", "host"}},
		{name: "space", s: Settings{EmulatorEndpoint: "local host:8085"}, want: []string{"EmulatorEndpoint", "host"}},
		{name: "ipv6 unbracketed", s: Settings{EmulatorEndpoint: "::1:8085"}, want: []string{"EmulatorEndpoint", "not host:port"}},

		{name: "rpc timeout", s: Settings{RPCTimeout: 10 * time.Second}},
		{name: "rpc timeout bare number", s: Settings{RPCTimeout: 30}, want: []string{"RPCTimeout 30ns", "between 1s and 10m0s", "bare number"}},
		{name: "rpc timeout an hour", s: Settings{RPCTimeout: time.Hour}, want: []string{"RPCTimeout 1h0m0s", "between 1s and 10m0s"}},
		{name: "rpc timeout negative", s: Settings{RPCTimeout: -time.Second}, want: []string{"RPCTimeout -1s", "or 0 for DefaultRPCTimeout"}},

		{name: "both set", s: Settings{EmulatorEndpoint: "localhost:8085", CredentialsFile: keyPath}, want: []string{"EmulatorEndpoint and CredentialsFile are both set"}},
		{name: "both set, bad endpoint", s: Settings{EmulatorEndpoint: "localhost", CredentialsFile: keyPath}, want: []string{"missing port", "both set"}},
		{name: "inline JSON", s: Settings{CredentialsFile: ` {"type": "service_account", "private_key_id": "abc123"}`}, want: []string{"CredentialsFile", "inline JSON", "path"}},
		{name: "JSON behind a BOM", s: Settings{CredentialsFile: "\ufeff{\"private_key_id\": \"abc123\"}"}, want: []string{"CredentialsFile", "inline JSON"}},
		{name: "base64 of JSON", s: Settings{CredentialsFile: "eyJwcml2YXRlX2tleV9pZCI6ICJhYmMxMjMifQ=="}, want: []string{"CredentialsFile", "base64"}},
		{name: "PEM", s: Settings{CredentialsFile: "-----BEGIN PRIVATE KEY-----abc123"}, want: []string{"CredentialsFile", "PEM"}},
		{name: "URL", s: Settings{CredentialsFile: "gs://bucket/pubsub-key.json"}, want: []string{"CredentialsFile", "URL"}},
		{name: "blank", s: Settings{CredentialsFile: "   "}, want: []string{"CredentialsFile", "blank"}},
		{name: "newline", s: Settings{CredentialsFile: keyPath + "\nabc123"}, want: []string{"CredentialsFile", "control characters"}},
		{name: "too long", s: Settings{CredentialsFile: "/" + strings.Repeat("a", 5000)}, want: []string{"CredentialsFile", "longer than 4096"}},
		{name: "host of 300 bytes", s: Settings{EmulatorEndpoint: strings.Repeat("a", 300) + ":8085"}, want: []string{"EmulatorEndpoint", "host of 300 bytes, over a host name's 253"}},
		{name: "empty label", s: Settings{EmulatorEndpoint: "local..host:8085"}, want: []string{`EmulatorEndpoint "local..host:8085"`, "empty label"}},
		{name: "fully qualified host", s: Settings{EmulatorEndpoint: "localhost.:8085"}},
		{name: "relative path", s: Settings{CredentialsFile: "keys/pubsub-key.json"}},

		{name: "monitoring beside an emulator", s: Settings{EmulatorEndpoint: "localhost:8085", MonitoringEndpoint: "localhost:8086"}},
		{name: "monitoring without an emulator", s: Settings{MonitoringEndpoint: "localhost:8086"}, want: []string{"MonitoringEndpoint is set without EmulatorEndpoint", "leave MonitoringEndpoint empty"}},
		{name: "monitoring with a scheme", s: Settings{EmulatorEndpoint: "localhost:8085", MonitoringEndpoint: "https://localhost:8086"}, want: []string{`MonitoringEndpoint "https://localhost:8086"`, "scheme", "plaintext"}},
		{name: "monitoring without a port", s: Settings{EmulatorEndpoint: "localhost:8085", MonitoringEndpoint: "localhost"}, want: []string{`MonitoringEndpoint "localhost"`, "missing port"}},
		{name: "monitoring with a password", s: Settings{EmulatorEndpoint: "localhost:8085", MonitoringEndpoint: "admin:hunter2@localhost:8086"}, want: []string{`MonitoringEndpoint "…@localhost:8086"`, "userinfo"}},
		{name: "emulator with a scheme and a password", s: Settings{EmulatorEndpoint: "http://admin:hunter2@localhost:8085"}, want: []string{`EmulatorEndpoint "http://…@localhost:8085"`, "scheme"}},
		{name: "monitoring of 64 KiB", s: Settings{EmulatorEndpoint: "localhost:8085", MonitoringEndpoint: strings.Repeat("a", 64<<10) + ":8086"}, want: []string{"MonitoringEndpoint", "host of 65536 bytes"}},
		{name: "monitoring beside a key", s: Settings{CredentialsFile: keyPath, MonitoringEndpoint: "localhost:8086"}, want: []string{"MonitoringEndpoint is set without EmulatorEndpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tc.s, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error containing %q", tc.s, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate(%+v) = %q, want it to contain %q", tc.s, err, w)
				}
			}
			for _, secret := range []string{keyPath, "pubsub-key", "abc123", "service_account", "hunter2"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Validate(%+v) = %q, which reveals %q", tc.s, err, secret)
				}
			}
			if len(err.Error()) > 1024 {
				t.Errorf("Validate: an error of %d bytes, want at most 1 KiB: quoted values are capped", len(err.Error()))
			}
		})
	}
}
