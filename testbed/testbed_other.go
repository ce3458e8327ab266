//go:build !linux

package testbed

import (
	"context"
	"errors"
	"net/netip"

	"github.com/netprober/prober/lab"
)

// StartProcess needs Linux.
func StartProcess(ctx context.Context, f *lab.Fabric, s ProcessSpec) (*Process, error) {
	return nil, errors.ErrUnsupported
}

// StartAgent needs Linux.
func StartAgent(ctx context.Context, f *lab.Fabric, s AgentSpec) (*Agent, error) {
	return nil, errors.ErrUnsupported
}

// StartFabric needs Linux.
func StartFabric(ctx context.Context, s FabricSpec) (*Fabric, error) {
	return nil, errors.ErrUnsupported
}

// StartPrometheus needs Linux.
func StartPrometheus(ctx context.Context, f *lab.Fabric, s PrometheusSpec) (*Prometheus, error) {
	return nil, errors.ErrUnsupported
}

// cgroupV2 needs Linux.
func cgroupV2() error { return errors.ErrUnsupported }

// AddHostAddrs needs Linux.
func AddHostAddrs(f *lab.Fabric, host string, n int) ([]netip.Addr, error) {
	return nil, errors.ErrUnsupported
}

// Usage needs Linux.
func (p *Process) Usage() (Usage, error) { return Usage{}, errors.ErrUnsupported }

// StartCoreDNS needs Linux.
func StartCoreDNS(ctx context.Context, f *lab.Fabric, s CoreDNSSpec) (*CoreDNS, error) {
	return nil, errors.ErrUnsupported
}

// CoreDNS is a CoreDNS server (Linux only).
type CoreDNS struct{ *Process }
