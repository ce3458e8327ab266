package testbed

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/netprober/prober/lab"
)

// AddHostAddrs gives node host n more addresses on its eth0, in its
// rack's node /24 from .32 up (lab numbers nodes .11 to .19), and returns
// them: a program listening on 0.0.0.0 there answers as n peers, which is
// how one responder stands in for a 5,000-node plan's targets. They go
// with the namespace when the lab is removed.
func AddHostAddrs(f *lab.Fabric, host string, n int) ([]netip.Addr, error) {
	h, ok := f.Host(host)
	if !ok || h.Class != lab.ClassNode {
		return nil, fmt.Errorf("add addresses: %s is not a lab node", host)
	}
	if n < 1 || n > maxHostAddrs {
		return nil, fmt.Errorf("add addresses to %s: %d not in 1..%d", host, n, maxHostAddrs)
	}
	b := h.Addr.As4()
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		b[3] = byte(firstHostAddr + i)
		addrs[i] = netip.AddrFrom4(b)
	}
	err := lab.Do(h.Namespace, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		for _, a := range addrs {
			ipn := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(24, 32)}
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
				return fmt.Errorf("%s: %w", a, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("add addresses to %s: %w", host, err)
	}
	return addrs, nil
}

// The addresses AddHostAddrs hands out: .32 to .231 of a node's /24.
const (
	firstHostAddr = 32
	maxHostAddrs  = 200
)
