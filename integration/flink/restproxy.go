package flink

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// RESTProxy is an HTTP proxy in front of a JobManager's REST API that,
// while down, answers 503 Service Unavailable to every request, as a
// JobManager electing its leader or still starting does.
type RESTProxy struct {
	// Addr is the proxy's host:port, for --pubsubio_flink_rest.
	Addr string

	down    atomic.Bool
	refused atomic.Int64
}

// StartRESTProxy serves a proxy of the REST API at target (host:port) on
// a free loopback port until the test ends.
func StartRESTProxy(t testing.TB, target string) *RESTProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("flink: REST proxy: %v", err)
	}
	p := &RESTProxy{Addr: ln.Addr().String()}
	forward := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			p.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"errors":["Service temporarily unavailable due to an ongoing leader election. Please refresh."]}`))
			return
		}
		forward.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// SetDown makes the proxy answer 503 to everything (true) or forward
// (false), from the next request on.
func (p *RESTProxy) SetDown(down bool) { p.down.Store(down) }

// Refused is how many requests the proxy answered with 503.
func (p *RESTProxy) Refused() int64 { return p.refused.Load() }
