package connection

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
)

// listTimeSeriesOnce makes one ListTimeSeries call on conn, as the read's
// backlog samples do.
func listTimeSeriesOnce(t *testing.T, s Settings) error {
	t.Helper()
	conn, err := DialMonitoring(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return conn.Invoke(ctx, "/google.monitoring.v3.MetricService/ListTimeSeries", &monitoringpb.ListTimeSeriesRequest{Name: "projects/" + fakeProject}, &monitoringpb.ListTimeSeriesResponse{})
}

// TestMonitoringEndpointCarriesNoCredentials: the Cloud Monitoring
// stand-in beside an emulator is reached in plaintext at
// MonitoringEndpoint, without credentials even where application-default
// credentials exist, and the emulator variable redirects nothing.
func TestMonitoringEndpointCarriesNoCredentials(t *testing.T) {
	withApplicationDefaultCredentials(t)
	t.Setenv(envVar, deadAddr(t))
	tr := newTrap(t)
	s := Settings{EmulatorEndpoint: deadAddr(t), MonitoringEndpoint: tr.addr}
	if err := listTimeSeriesOnce(t, s); !tr.reached(err) {
		t.Fatalf("ListTimeSeries = %v, want the answer of the server at MonitoringEndpoint", err)
	}
	calls := tr.receivedMetadata()
	if len(calls) != 1 {
		t.Fatalf("MonitoringEndpoint saw %d calls, want 1", len(calls))
	}
	if found := carriedCredentials(calls[0]); len(found) > 0 {
		t.Errorf("the call to MonitoringEndpoint carried credentials: %v", found)
	}
	if got, want := s.MonitoringTarget(), tr.addr; got != want {
		t.Errorf("MonitoringTarget() = %q, want %q", got, want)
	}
}

// TestDialMonitoringTargets: production dials Cloud Monitoring's endpoint
// (nothing is sent until a call); an emulator without a Monitoring
// endpoint has none; invalid settings are refused.
func TestDialMonitoringTargets(t *testing.T) {
	withApplicationDefaultCredentials(t)
	t.Setenv(envVar, deadAddr(t))
	conn, err := DialMonitoring(context.Background(), Settings{})
	if err != nil {
		t.Fatalf("DialMonitoring(production): %v", err)
	}
	if got, want := conn.Target(), MonitoringProductionEndpoint; got != want {
		t.Errorf("production target = %q, want %q", got, want)
	}
	conn.Close()
	if !(Settings{}).Monitors() || (Settings{EmulatorEndpoint: "localhost:8085"}).Monitors() {
		t.Error("Monitors: want true for production, false for an emulator alone")
	}
	if _, err := DialMonitoring(context.Background(), Settings{EmulatorEndpoint: "localhost:8085"}); !errors.Is(err, ErrNoMonitoring) {
		t.Errorf("DialMonitoring(emulator only) = %v, want ErrNoMonitoring", err)
	}
	if _, err := DialMonitoring(context.Background(), Settings{MonitoringEndpoint: "localhost:8086"}); err == nil {
		t.Error("DialMonitoring(MonitoringEndpoint without an emulator) succeeded, want the Validate error")
	}
}
