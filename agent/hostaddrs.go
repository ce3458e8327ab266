package agent

import (
	"net"
	"net/netip"
	"slices"

	"github.com/netprober/prober/api"
)

// A node agent runs in its node's network namespace and sees the
// addresses the node answers traces from besides its own source: an
// overlay's tunnel endpoint (flannel.1 holds its pod CIDR's first
// address), a CNI bridge's gateway (cni0). A pod's trace to another
// node's pod hears that node from its tunnel address; reported, the
// matrix knows it as the node and never files it as a fabric device.

// updateHostAddrs relists a node agent's host addresses; a pod agent's
// interfaces are its own, and it reports none.
func (a *Agent) updateHostAddrs() {
	if a.cfg.Class != api.ClassNode {
		return
	}
	ifs, err := a.ifAddrs()
	if err != nil {
		a.log.Debug("host addresses", "err", err)
		return
	}
	own := a.cfg.Sources
	addrs := hostAddresses(ifs, own)
	a.mu.Lock()
	a.hostAddrs = addrs
	a.mu.Unlock()
}

// hostAddresses are the addresses of ifs that can answer a trace across
// the cluster: not the agent's own sources (reported apart), loopback,
// link-local, multicast or unspecified ones. Sorted, at most
// api.MaxHostAddresses.
func hostAddresses(ifs []net.Addr, own []netip.Addr) []string {
	var out []netip.Addr
	for _, ifa := range ifs {
		p, err := netip.ParsePrefix(ifa.String())
		if err != nil {
			continue
		}
		a := p.Addr().Unmap()
		if !a.IsGlobalUnicast() || a.IsLinkLocalUnicast() || slices.Contains(own, a) {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	out = slices.Compact(out)
	strs := make([]string, 0, min(len(out), api.MaxHostAddresses))
	for _, a := range out[:min(len(out), api.MaxHostAddresses)] {
		strs = append(strs, a.String())
	}
	return strs
}
