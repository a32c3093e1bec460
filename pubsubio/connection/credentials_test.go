package connection

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Values written into fake keys; no error may contain any of them.
const (
	fakeProject      = "fake-project-4711"
	fakePrivateKeyID = "0f1e2d3c4b5a69788796a5b4c3d2e1f0deadbeef"
	fakeClientEmail  = "fake-writer@fake-project-4711.iam.gserviceaccount.com"
	fakeClientID     = "109876543210987654321"
	fakeRefreshToken = "1//fake-refresh-token-zz9"
	fakeKeyFileName  = "sa-key-7f3a.json"
)

// testRSAKey is generated once per test run; no key is committed.
var testRSAKey = sync.OnceValues(func() (*rsa.PrivateKey, error) {
	return rsa.GenerateKey(rand.Reader, 2048)
})

func pemKey(t *testing.T, pkcs1 bool) string {
	t.Helper()
	k, err := testRSAKey()
	if err != nil {
		t.Fatal(err)
	}
	if pkcs1 {
		return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// fakeServiceAccountKey returns the fields of a syntactically valid
// service-account key, as the console would download it.
func fakeServiceAccountKey(t *testing.T) map[string]any {
	return map[string]any{
		"type":            "service_account",
		"project_id":      fakeProject,
		"private_key_id":  fakePrivateKeyID,
		"private_key":     pemKey(t, false),
		"client_email":    fakeClientEmail,
		"client_id":       fakeClientID,
		"auth_uri":        "https://accounts.google.com/o/oauth2/auth",
		"token_uri":       "https://oauth2.googleapis.com/token",
		"universe_domain": "googleapis.com",
	}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeKeyFile writes data to a fresh file and returns its path.
func writeKeyFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fakeKeyFileName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// assertNoLeak fails if err shows the path, the file name or any of the
// distinctive values the fake key files hold.
func assertNoLeak(t *testing.T, err error, path string) {
	t.Helper()
	msg := err.Error()
	secrets := []string{path, filepath.Dir(path), fakeKeyFileName, fakeProject, fakePrivateKeyID, fakeClientEmail, fakeClientID, fakeRefreshToken}
	// A line from the middle of the PEM stands for the key material.
	secrets = append(secrets, strings.Split(pemKey(t, false), "\n")[5])
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Errorf("error %q reveals %q", msg, s)
		}
	}
}

func TestCredentialsFileAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  func(map[string]any)
	}{
		{"as downloaded", func(map[string]any) {}},
		{"PKCS #1 key", func(k map[string]any) { k["private_key"] = pemKey(t, true) }},
		{"minimal fields", func(k map[string]any) {
			for f := range k {
				if f != "type" && f != "client_email" && f != "private_key" {
					delete(k, f)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := fakeServiceAccountKey(t)
			tc.key(k)
			got, err := readServiceAccountKey(writeKeyFile(t, marshal(t, k)))
			if err != nil {
				t.Fatalf("readServiceAccountKey: %v", err)
			}
			// What reaches the library is the same key, re-encoded.
			var back map[string]any
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			for f, v := range k {
				if back[f] != v {
					t.Errorf("re-encoded key has %s = %v, want %v", f, back[f], v)
				}
			}
			if len(back) != len(k) {
				t.Errorf("re-encoded key has fields %v, want those of %v", back, k)
			}

			// Building the client needs no network and no ADC.
			c, err := NewClient(context.Background(), fakeProject, Settings{CredentialsFile: writeKeyFile(t, marshal(t, k))})
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestCredentialsFileErrors(t *testing.T) {
	withKey := func(edit func(k map[string]any)) func(t *testing.T) string {
		return func(t *testing.T) string {
			k := fakeServiceAccountKey(t)
			edit(k)
			return writeKeyFile(t, marshal(t, k))
		}
	}
	withBytes := func(b func(t *testing.T) []byte) func(t *testing.T) string {
		return func(t *testing.T) string { return writeKeyFile(t, b(t)) }
	}
	ecKey := func(t *testing.T) string {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	}

	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
		want string // substring of the error, besides "CredentialsFile"
		is   error  // if set, errors.Is must hold
	}{
		{
			name: "missing file",
			path: func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent", fakeKeyFileName) },
			want: "cannot be read",
			is:   fs.ErrNotExist,
		},
		{
			name: "directory",
			path: func(t *testing.T) string {
				p := filepath.Join(t.TempDir(), fakeKeyFileName)
				if err := os.Mkdir(p, 0o700); err != nil {
					t.Fatal(err)
				}
				return p
			},
			want: "cannot be read",
		},
		{
			name: "no read permission",
			path: func(t *testing.T) string {
				if os.Geteuid() == 0 {
					t.Skip("root reads files regardless of their mode")
				}
				p := writeKeyFile(t, marshal(t, fakeServiceAccountKey(t)))
				if err := os.Chmod(p, 0); err != nil {
					t.Fatal(err)
				}
				return p
			},
			want: "cannot be read",
			is:   fs.ErrPermission,
		},
		{
			name: "empty file",
			path: withBytes(func(*testing.T) []byte { return nil }),
			want: "is empty",
		},
		{
			name: "truncated JSON",
			path: withBytes(func(t *testing.T) []byte {
				b := marshal(t, fakeServiceAccountKey(t))
				return b[:len(b)/2]
			}),
			want: "not valid JSON",
		},
		{
			name: "syntax error inside a value",
			path: withBytes(func(*testing.T) []byte {
				return []byte(`{"type": "service_account", "private_key_id": ` + fakePrivateKeyID + `}`)
			}),
			want: "not valid JSON",
		},
		{
			name: "field of the wrong type",
			path: withBytes(func(*testing.T) []byte {
				return []byte(`{"type": "service_account", "client_email": ["` + fakeClientEmail + `"], "project_id": 4711}`)
			}),
			want: "not a service-account JSON key",
		},
		{
			name: "JSON array",
			path: withBytes(func(*testing.T) []byte { return []byte(`["` + fakeClientEmail + `"]`) }),
			want: "not a service-account JSON key",
		},
		{
			name: "authorized user",
			path: withBytes(func(t *testing.T) []byte {
				return marshal(t, map[string]string{
					"type":          "authorized_user",
					"client_id":     fakeClientID,
					"client_secret": fakePrivateKeyID,
					"refresh_token": fakeRefreshToken,
					"account":       fakeClientEmail,
				})
			}),
			want: `not a service-account key`,
		},
		{
			name: "external account",
			path: withKey(func(k map[string]any) {
				k["type"] = "external_account"
				k["credential_source"] = map[string]string{"executable": "/bin/" + fakeProject}
			}),
			want: `not a service-account key`,
		},
		{
			name: "no type",
			path: withKey(func(k map[string]any) { delete(k, "type") }),
			want: `not a service-account key`,
		},
		{
			name: "no private key",
			path: withKey(func(k map[string]any) { delete(k, "private_key") }),
			want: `without "client_email" or "private_key"`,
		},
		{
			name: "no client email",
			path: withKey(func(k map[string]any) { delete(k, "client_email") }),
			want: `without "client_email" or "private_key"`,
		},
		{
			name: "private key not PEM",
			path: withKey(func(k map[string]any) { k["private_key"] = fakePrivateKeyID }),
			want: "not a PEM-encoded RSA private key",
		},
		{
			name: "private key truncated",
			path: withKey(func(k map[string]any) {
				pk := k["private_key"].(string)
				lines := strings.Split(pk, "\n")
				k["private_key"] = strings.Join(append(lines[:6:6], lines[len(lines)-2:]...), "\n")
			}),
			want: "not a PEM-encoded RSA private key",
		},
		{
			name: "private key not RSA",
			path: withKey(func(k map[string]any) { k["private_key"] = ecKey(t) }),
			want: "not a PEM-encoded RSA private key",
		},
		{
			name: "other universe",
			path: withKey(func(k map[string]any) { k["universe_domain"] = fakeProject + ".example" }),
			want: "universe other than googleapis.com",
		},
		{
			name: "too large",
			path: withKey(func(k map[string]any) { k["padding"] = strings.Repeat(fakeClientEmail, 2000) }),
			want: "larger than 64 KiB",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			_, err := NewClient(context.Background(), fakeProject, Settings{CredentialsFile: path})
			if err == nil {
				t.Fatal("NewClient succeeded, want an error")
			}
			t.Logf("error: %v", err)
			for _, w := range []string{"CredentialsFile", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%q, %v) = false, want true", err, tc.is)
			}
			assertNoLeak(t, err, path)
		})
	}
}

// A key whose token_uri names another endpoint would make the worker send
// a signed assertion there and use the token it returns: refused when the
// client is built, and the endpoint receives nothing.
func TestCredentialsFileRefusesAForeignTokenURI(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token": "stolen", "token_type": "Bearer", "expires_in": 3600}`))
	}))
	defer srv.Close()
	for _, uri := range []string{srv.URL + "/token", "https://token.example.invalid/token"} {
		k := fakeServiceAccountKey(t)
		k["token_uri"] = uri
		path := writeKeyFile(t, marshal(t, k))
		c, err := NewClient(context.Background(), fakeProject, Settings{CredentialsFile: path})
		if err == nil {
			c.Close()
			t.Fatalf("token_uri %s: the client was built", uri)
		}
		if !strings.Contains(err.Error(), "token_uri") {
			t.Errorf("token_uri %s: error %q does not name token_uri", uri, err)
		}
		assertNoLeak(t, err, path)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the foreign token endpoint received %d requests, want none", n)
	}
}

// A named pipe blocks open(2) until a writer comes: refused without
// blocking, as anything but a regular file is.
func TestCredentialsFileRefusesWhatIsNotARegularFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "key-fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	for _, path := range []string{fifo, t.TempDir(), "/dev/zero"} {
		done := make(chan error, 1)
		go func() {
			_, err := readServiceAccountKey(path)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still reading after 30s; want a refusal without blocking", filepath.Base(path))
		}
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v, want a refusal saying it is not a regular file", filepath.Base(path), err)
		}
		assertNoLeak(t, err, path)
	}
}
