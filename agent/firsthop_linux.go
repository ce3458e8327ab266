package agent

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// firstHopRoutes asks the kernel, as `ip route get` does, which route
// each of dsts takes from src: its own choice, policy routing and ECMP
// included, for either family. One netlink socket serves the pass. A
// destination without a route counts as no gateway.
func firstHopRoutes(src netip.Addr, dsts []netip.Addr) ([]netip.Addr, netip.Addr, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("netlink route socket: %w", err)
	}
	defer h.Close()
	gws := make([]netip.Addr, 0, len(dsts))
	for _, d := range dsts {
		var opt *netlink.RouteGetOptions
		if src.IsValid() && !src.IsUnspecified() && src.Is4() == d.Is4() {
			opt = &netlink.RouteGetOptions{SrcAddr: src.AsSlice()}
		}
		rs, err := h.RouteGetWithOptions(d.AsSlice(), opt)
		if err != nil || len(rs) == 0 {
			gws = append(gws, netip.Addr{})
			continue
		}
		gws = append(gws, gatewayOf(rs[0]))
	}
	family := netlink.FAMILY_V4
	if src.Is6() && !src.Is4In6() {
		family = netlink.FAMILY_V6
	}
	defaults, err := h.RouteListFiltered(family, &netlink.Route{}, netlink.RT_FILTER_DST)
	if err != nil {
		return gws, netip.Addr{}, fmt.Errorf("default route: %w", err)
	}
	return gws, defaultGateway(defaults), nil
}

// gatewayOf is r's gateway: its own, else the lowest of its multipath
// next hops' (a node dual-homed to two ToRs takes the same one every
// pass); invalid for an on-link route.
func gatewayOf(r netlink.Route) netip.Addr {
	if gw := addrOf(r.Gw); gw.IsValid() {
		return gw
	}
	var low netip.Addr
	for _, nh := range r.MultiPath {
		if gw := addrOf(nh.Gw); gw.IsValid() && (!low.IsValid() || gw.Less(low)) {
			low = gw
		}
	}
	return low
}

// defaultGateway is the gateway of the first default route of rs that
// has one, by lowest metric.
func defaultGateway(rs []netlink.Route) netip.Addr {
	var best netip.Addr
	bestPrio := -1
	for _, r := range rs {
		gw := gatewayOf(r)
		if gw.IsValid() && (bestPrio < 0 || r.Priority < bestPrio) {
			best, bestPrio = gw, r.Priority
		}
	}
	return best
}

func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}
