package connection

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// maxKeyFileSize bounds how much of CredentialsFile is read. A service-account
// key is about 2.3 KiB; the bound keeps a wrong path (a log, a device) from
// being read whole.
const maxKeyFileSize = 64 << 10

// errReadFailed stands in for a read error that is not an *fs.PathError, whose
// text could carry the path.
var errReadFailed = errors.New("read error")

// serviceAccountKey has every field the auth library reads from a
// service-account key, all strings, so that any malformed field fails here,
// with an error that quotes nothing, and never later in the library, whose
// JSON errors may quote the value.
type serviceAccountKey struct {
	Type           string `json:"type"`
	ProjectID      string `json:"project_id,omitempty"`
	PrivateKeyID   string `json:"private_key_id,omitempty"`
	PrivateKey     string `json:"private_key"`
	ClientEmail    string `json:"client_email"`
	ClientID       string `json:"client_id,omitempty"`
	AuthURI        string `json:"auth_uri,omitempty"`
	TokenURI       string `json:"token_uri,omitempty"`
	UniverseDomain string `json:"universe_domain,omitempty"`
	QuotaProjectID string `json:"quota_project_id,omitempty"`
}

// readServiceAccountKey reads the key at path, checks that it is a usable
// service-account key, and returns it re-encoded from the checked fields, so
// that the library parses only JSON this package produced.
//
// No error contains the path or any byte of the file: both end up in worker
// logs, and the file's bytes are the secret itself. Only service-account keys
// are accepted because other credential types (external accounts above all)
// make the library fetch URLs and run commands named in the file.
func readServiceAccountKey(path string) ([]byte, error) {
	raw, err := readLimited(path)
	if err != nil {
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			err = pe.Err // the reason (no such file, permission denied...) without the path
		case !errors.Is(err, errNotRegular):
			err = errReadFailed
		}
		return nil, fmt.Errorf("CredentialsFile cannot be read on this worker: %w; install the key at that path on every worker, readable by the SDK harness, or leave CredentialsFile empty for application-default credentials", err)
	}
	if len(raw) == 0 {
		return nil, errors.New("CredentialsFile is empty; point it at the JSON key downloaded for the service account")
	}
	if len(raw) > maxKeyFileSize {
		return nil, fmt.Errorf("CredentialsFile is larger than %d KiB, so it is not a service-account key; point it at the JSON key downloaded for the service account", maxKeyFileSize>>10)
	}

	var key serviceAccountKey
	if err := json.Unmarshal(raw, &key); err != nil {
		// The json package's messages quote the offending character or
		// value, so only its position is reported.
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("CredentialsFile is not valid JSON (syntax error at byte %d); point it at the service-account JSON key file", se.Offset)
		}
		return nil, errors.New("CredentialsFile is not a service-account JSON key: it is not a JSON object whose key fields are strings; point it at the JSON key downloaded for the service account")
	}
	if key.Type != "service_account" {
		return nil, errors.New(`CredentialsFile is not a service-account key (its "type" is not "service_account"); only service-account keys are accepted: create one with "gcloud iam service-accounts keys create", or leave CredentialsFile empty to use application-default credentials`)
	}
	if key.ClientEmail == "" || key.PrivateKey == "" {
		return nil, errors.New(`CredentialsFile is a service-account key without "client_email" or "private_key"; download a new key for the service account`)
	}
	if !isRSAPrivateKey(key.PrivateKey) {
		return nil, errors.New(`CredentialsFile has a "private_key" that is not a PEM-encoded RSA private key; download a new key for the service account`)
	}
	if !googleTokenURIs[key.TokenURI] {
		return nil, errors.New(`CredentialsFile is a service-account key whose "token_uri" is not Google's token endpoint; download a new key for the service account`)
	}
	if key.UniverseDomain != "" && key.UniverseDomain != "googleapis.com" {
		// The connection goes to pubsub.googleapis.com; a key from another
		// universe would fail on every RPC with an error quoting the file.
		return nil, errors.New(`CredentialsFile is a key for a universe other than googleapis.com; pubsubio connects only to pubsub.googleapis.com`)
	}
	return json.Marshal(key)
}

// errNotRegular stands in for reading something other than a regular file.
var errNotRegular = errors.New("it is not a regular file (a named pipe, a device or a directory would block or mislead the read)")

// readLimited reads at most maxKeyFileSize+1 bytes of path, enough to tell
// that a file is too large. It opens without blocking and reads only a
// regular file: opening a named pipe blocks until a writer comes, forever.
func readLimited(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errNotRegular
	}
	return io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
}

// googleTokenURIs are the token endpoints Google's service-account keys
// name. A key naming another would make the worker send a signed assertion
// there and trust whatever token comes back.
var googleTokenURIs = map[string]bool{
	"":                                    true, // the library's default, Google's
	"https://oauth2.googleapis.com/token": true,
	"https://accounts.google.com/o/oauth2/token": true, // keys made before 2019
}

// isRSAPrivateKey reports whether s is a PEM private key the auth library can
// sign with: RSA, in PKCS #8 (what Google issues) or PKCS #1. Checking it here
// turns a truncated key into an error when the client is built, not on the
// first RPC.
func isRSAPrivateKey(s string) bool {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return false
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		_, ok := k.(*rsa.PrivateKey)
		return ok
	}
	_, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	return err == nil
}
