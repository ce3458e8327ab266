package agent

import (
	"net/netip"

	"github.com/vishvananda/netlink"
)

// routeMTU is the MTU of the interface the kernel's route from src to
// dst leaves by (the link's, not a path MTU it has learnt: probing at
// the link's size is what finds a smaller path), or 0 when unknown.
func routeMTU(src, dst netip.Addr) int {
	var opt *netlink.RouteGetOptions
	if src.IsValid() && !src.IsUnspecified() && src.Is4() == dst.Is4() {
		opt = &netlink.RouteGetOptions{SrcAddr: src.AsSlice()}
	}
	rs, err := netlink.RouteGetWithOptions(dst.AsSlice(), opt)
	if err != nil || len(rs) == 0 {
		return 0
	}
	l, err := netlink.LinkByIndex(rs[0].LinkIndex)
	if err != nil {
		return 0
	}
	return l.Attrs().MTU
}
