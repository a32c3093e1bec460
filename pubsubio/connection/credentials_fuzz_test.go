package connection

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// digits stands for the numbers an error may carry (a JSON syntax error's
// offset, a size limit): they are positions and bounds, not file bytes.
var digits = regexp.MustCompile(`[0-9]+`)

// errorShape is msg with its numbers blanked.
func errorShape(msg string) string { return digits.ReplaceAllString(msg, "N") }

// referenceShapes are the shapes of the errors for one file of each kind of
// malformation, each written to a path nothing else uses and holding no
// value a fuzzed file could share. A fuzzed file's error must have one of
// these shapes: an error that quoted the fuzzed file's bytes or its path
// would have a shape of its own.
var referenceShapes = sync.OnceValues(func() (map[string]bool, error) {
	dir, err := os.MkdirTemp("", "reference-keys-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	k, err := testRSAKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	rsaPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	key := func(fields map[string]any) string {
		b, _ := json.Marshal(fields)
		return string(b)
	}
	files := []string{
		"",   // empty
		"{",  // not JSON
		"[]", // JSON, not an object of strings
		"{}", // no type
		key(map[string]any{"type": "service_account"}),                                          // no email, no key
		key(map[string]any{"type": "service_account", "client_email": "e", "private_key": "k"}), // key not PEM
		key(map[string]any{"type": "service_account", "client_email": "e", "private_key": rsaPEM, // another universe
			"universe_domain": "u"}),
		key(map[string]any{"type": "service_account", "client_email": "e", "private_key": rsaPEM, // another token endpoint
			"token_uri": "t"}),
		strings.Repeat(" ", maxKeyFileSize+1), // too large
	}
	shapes := map[string]bool{}
	for i, content := range files {
		path := filepath.Join(dir, "reference-"+string(rune('a'+i))+".json")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return nil, err
		}
		_, err := readServiceAccountKey(path)
		if err == nil {
			return nil, fmt.Errorf("reference file %d (%.40q) was accepted; it must stand for a rejection", i, content)
		}
		shapes[errorShape(err.Error())] = true
	}
	return shapes, nil
})

// FuzzCredentialsFile: whatever a CredentialsFile holds, reading it never
// panics; an accepted file yields a service-account key the library can
// parse; a rejected one yields an error of one of the reference shapes, so
// it contains neither the path nor any byte of the file.
func FuzzCredentialsFile(f *testing.F) {
	for _, s := range []string{
		"",
		"{",
		`{"type": "service_account", "private_key_id": 0f1e2d}`,
		`{"type": "service_account", "client_email": ["fake@x.iam"], "project_id": 4711}`,
		`["fake-writer@fake-project-4711.iam.gserviceaccount.com"]`,
		`{"type": "authorized_user", "refresh_token": "1//fake-refresh-token-zz9"}`,
		`{"type": "external_account", "credential_source": {"executable": "/bin/sh"}}`,
		`{"type": "service_account", "client_email": "fake@x.iam", "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}`,
		`{"type": "service_account", "client_email": "fake@x.iam", "private_key": "not pem"}`,
		"\xff\xfe{\"type\": \"service_account\"}",
		`"service_account"`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		shapes, err := referenceShapes()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "fuzzed-key-file.json")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		key, err := readServiceAccountKey(path)
		if err == nil {
			var back serviceAccountKey
			if jerr := json.Unmarshal(key, &back); jerr != nil || back.Type != "service_account" || back.ClientEmail == "" || !isRSAPrivateKey(back.PrivateKey) {
				t.Fatalf("accepted %q but passes on %q (%v)", content, key, jerr)
			}
			return
		}
		if shape := errorShape(err.Error()); !shapes[shape] {
			t.Fatalf("error for file %q has a shape no reference file produces, so it may echo the file or its path:\n%v", content, err)
		}
	})
}
