package connection

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
)

// MonitoringProductionEndpoint is the Cloud Monitoring endpoint the read
// samples backlog from when no EmulatorEndpoint is set.
const MonitoringProductionEndpoint = "monitoring.googleapis.com:443"

// monitoringReadScope is all the backlog samples need: reading time series.
const monitoringReadScope = "https://www.googleapis.com/auth/monitoring.read"

// ErrNoMonitoring is DialMonitoring's error for an emulator connection
// without a MonitoringEndpoint: there is no Cloud Monitoring to ask.
var ErrNoMonitoring = errors.New("the connection names an emulator and no MonitoringEndpoint")

// Monitors reports whether s has a Cloud Monitoring to sample backlog
// from: production, or an emulator with a MonitoringEndpoint beside it.
func (s Settings) Monitors() bool {
	return s.EmulatorEndpoint == "" || s.MonitoringEndpoint != ""
}

// MonitoringTarget is where DialMonitoring connects: MonitoringEndpoint, or
// MonitoringProductionEndpoint.
func (s Settings) MonitoringTarget() string {
	if s.MonitoringEndpoint != "" {
		return s.MonitoringEndpoint
	}
	return MonitoringProductionEndpoint
}

// DialMonitoring opens the gRPC connection to Cloud Monitoring that s
// describes: plaintext without credentials to MonitoringEndpoint beside an
// emulator, or TLS to MonitoringProductionEndpoint as the identity Dial
// uses for Pub/Sub, with the read-only monitoring scope. An emulator
// without MonitoringEndpoint is ErrNoMonitoring. Pass the connection to
// cloud.google.com/go/monitoring with option.WithGRPCConn; the caller owns
// it.
func DialMonitoring(ctx context.Context, s Settings, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch {
	case s.MonitoringEndpoint != "":
		return dialPlaintext("MonitoringEndpoint", s.MonitoringEndpoint, extra)
	case s.EmulatorEndpoint != "":
		return nil, ErrNoMonitoring
	}
	return dialProduction(ctx, s, "Cloud Monitoring", MonitoringProductionEndpoint, []string{monitoringReadScope}, extra)
}

// validateMonitoring checks MonitoringEndpoint: a host:port without a
// scheme, and only beside an emulator.
func (s Settings) validateMonitoring() []error {
	if s.MonitoringEndpoint == "" {
		return nil
	}
	var errs []error
	if err := CheckHostPort("MonitoringEndpoint", s.MonitoringEndpoint, "localhost:8086"); err != nil {
		errs = append(errs, fmt.Errorf("%w (it is always reached over plaintext gRPC)", err))
	}
	if s.EmulatorEndpoint == "" {
		errs = append(errs, errors.New("MonitoringEndpoint is set without EmulatorEndpoint: it is a plaintext stand-in for Cloud Monitoring beside an emulator; against production Pub/Sub the read samples Cloud Monitoring itself with the connection's credentials, so leave MonitoringEndpoint empty"))
	}
	return errs
}
