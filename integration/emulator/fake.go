package emulator

import (
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"
)

// KindFake is an in-process pstest server (see Fake).
const KindFake Kind = "fake"

// Fake returns an Emulator backed by an in-process pstest server on a
// loopback port, plus the server itself, for tests that need what the real
// emulator does not expose: per-message ack counts (srv.Message(id).Acks) or
// fault injection (reactor options). The fixtures and Client work on it as
// on the real emulator. It needs no TestMain and is closed when the test
// ends. Prefer Require when the real service behaviour matters.
func Fake(t testing.TB, opts ...pstest.ServerReactorOption) (*Emulator, *pstest.Server) {
	t.Helper()
	srv := pstest.NewServerWithAddress("127.0.0.1:0", opts...)
	e := &Emulator{Endpoint: srv.Addr, Project: Project, Kind: KindFake, stopFn: srv.Close}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Logf("emulator: closing pstest server at %s: %v", e.Endpoint, err)
		}
	})
	return e, srv
}
