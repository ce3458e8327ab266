//go:build !linux

package agent

import (
	"errors"
	"net/netip"
)

// firstHopRoutes needs Linux's netlink: elsewhere the agent reports no
// first hop.
func firstHopRoutes(netip.Addr, []netip.Addr) ([]netip.Addr, netip.Addr, error) {
	return nil, netip.Addr{}, errors.ErrUnsupported
}
