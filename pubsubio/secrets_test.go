package pubsubio_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// A fragment of a key no test key file would lack; it must never be in a
// pipeline's description.
const keyMarker = "not-a-real-private-key-0123456789"

// CredentialsFile is serialized into the graph, so only a path is
// accepted: key material pasted into it in any of the forms people paste it
// (JSON behind a byte-order mark, PEM, the base64 of a key or of a PEM
// block, a PEM body without its armour) is refused at
// construction, and never reaches the marshalled pipeline. A path does, and
// the key's bytes do not.
func TestKeyMaterialNeverReachesThePipeline(t *testing.T) {
	key := `{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\n` + keyMarker + `\n-----END PRIVATE KEY-----\n", "client_email": "x@y"}`
	path := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(path, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	pem := "-----BEGIN PRIVATE KEY-----\n" + keyMarker + "\n-----END PRIVATE KEY-----\n"
	// A PEM body is the base64 of DER: an ASN.1 SEQUENCE with a long-form
	// length ("MII..."), here around the marker.
	der := append([]byte{0x30, 0x82, 0x04, 0xbd}, []byte(strings.Repeat(keyMarker, 3))...)
	for name, setting := range map[string]string{
		"JSON":                        key,
		"JSON behind a BOM":           "\ufeff" + key,
		"PEM":                         pem,
		"base64 of the key":           base64.StdEncoding.EncodeToString([]byte(key)),
		"unpadded URL base64":         base64.RawURLEncoding.EncodeToString([]byte(key)),
		"key material on one line":    strings.ReplaceAll(pem, "\n", " "),
		"a gs:// URL of a key":        "gs://bucket/" + keyMarker + ".json",
		"a key file's path and more":  path + "\n" + keyMarker,
		"base64 of a PEM key":         base64.StdEncoding.EncodeToString([]byte(pem)),
		"base64 of JSON behind a BOM": base64.StdEncoding.EncodeToString([]byte("\ufeff" + key)),
		"a PEM body without armour":   base64.StdEncoding.EncodeToString(der),
	} {
		t.Run(name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			_, err := pubsubio.TryRead(s, pubsubio.ReadConfig{
				Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders")},
				Connection:    pubsubio.Connection{CredentialsFile: setting},
			})
			if err == nil {
				if b := marshalled(t, p); bytes.Contains(b, []byte(keyMarker)) || bytes.Contains(b, []byte(setting)) {
					t.Fatal("accepted, and the key material is in the marshalled pipeline")
				}
				t.Fatal("accepted: want a construction error naming CredentialsFile")
			}
			if !strings.Contains(err.Error(), "CredentialsFile") || strings.Contains(err.Error(), keyMarker) || strings.Contains(err.Error(), setting) {
				t.Errorf("error %q: want it to name CredentialsFile and not quote the setting", err)
			}
		})
	}

	p, s := beam.NewPipelineWithRoot()
	if _, err := pubsubio.TryRead(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders")},
		Connection:    pubsubio.Connection{CredentialsFile: path},
	}); err != nil {
		t.Fatalf("a key file's path: %v", err)
	}
	b := marshalled(t, p)
	if !bytes.Contains(b, []byte(path)) || bytes.Contains(b, []byte(keyMarker)) {
		t.Errorf("the marshalled pipeline holds the path %v and the key's bytes %v; want the path only", bytes.Contains(b, []byte(path)), bytes.Contains(b, []byte(keyMarker)))
	}
}
