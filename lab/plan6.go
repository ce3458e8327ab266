package lab

import (
	"encoding/binary"
	"net/netip"
)

// The IPv6 plan, beside the IPv4 one (Spec.IPv6); doc.go explains it.
// Everything is inside 2001:2::/48 (RFC 5180 benchmarking space), and
// every count is below 10, so each hexadecimal digit of a subnet or
// interface ID below is one decimal number of the IPv4 plan: n21 is
// 198.19.2.11 and 2001:2:0:2::11.
var (
	// LabRange6 is the only IPv6 range the lab numbers from.
	LabRange6  = netip.MustParsePrefix("2001:2::/48")
	lbNet6     = netip.PrefixFrom(v6(digits(2, 5, 0), 0), 64)
	vipAddr6   = v6(digits(2, 5, 0), 0x10)
	lbSrcAddr6 = v6(digits(2, 5, 0), 0x11)
	cpNet6     = netip.PrefixFrom(v6(digits(2, 5, 1), 0), 64)
	cpAddr6    = v6(digits(2, 5, 1), 0x10)
	// PodRange6 holds every rack's pod network (2001:2:0:101::/64 ..
	// 2001:2:0:109::/64): a cluster's IPv6 pod CIDR.
	PodRange6 = netip.MustParsePrefix("2001:2:0:100::/56")
)

// v6 is 2001:2:0:subnet::iid.
func v6(subnet uint16, iid uint64) netip.Addr {
	b := [16]byte{0x20, 0x01, 0x00, 0x02}
	binary.BigEndian.PutUint16(b[6:], subnet)
	binary.BigEndian.PutUint64(b[8:], iid)
	return netip.AddrFrom16(b)
}

// digits writes decimal numbers below 10 as hexadecimal digits, so that
// digits(1, 2, 0, 3) is 0x1203 and reads "1203" in an address.
func digits(ds ...int) uint16 {
	var x uint16
	for _, d := range ds {
		x = x<<4 | uint16(d&0xf)
	}
	return x
}

// Spine s's links are 2001:2:0:1S00::/56, one /127 each (RFC 6164):
// ToR r's 2001:2:0:1S0R::/127, the LB's 2001:2:0:1Sfe::/127 and the
// control plane's 2001:2:0:1Sfc::/127 (.254 and .252 in IPv4); the spine
// has ::0, the other end ::1. In three tiers, aggregation switch A of
// fabric pod P has 2001:2:0:3PA0::/60 (ToR r's 2001:2:0:3PAR::/127) and
// super-spine S 2001:2:0:4S00::/56 (aggregation switch A of pod P's
// 2001:2:0:4SPA::/127, the LB's and the control plane's as a spine's).
func upperLinks6(u upper) netip.Prefix {
	base, bits := upperBase6(u)
	return netip.PrefixFrom(v6(base, 0), bits)
}
func upperBase6(u upper) (subnet uint16, bits int) {
	switch u.tier {
	case tierAgg:
		return digits(3, u.a, u.b, 0), 60
	case tierSuper:
		return digits(4, u.a, 0, 0), 56
	}
	return digits(1, u.a, 0, 0), 56
}
func downLink6(u upper, c child) (up, down netip.Prefix) {
	base, _ := upperBase6(u)
	if c.b > 0 {
		return link127(base | digits(c.a, c.b))
	}
	return link127(base | digits(c.a))
}
func lbLink6(u upper) (up, lb netip.Prefix) { base, _ := upperBase6(u); return link127(base | 0xfe) }
func cpLink6(u upper) (up, cp netip.Prefix) { base, _ := upperBase6(u); return link127(base | 0xfc) }
func link127(subnet uint16) (a, b netip.Prefix) {
	return netip.PrefixFrom(v6(subnet, 0), 127), netip.PrefixFrom(v6(subnet, 1), 127)
}

// Rack r's nodes share 2001:2:0:R::/64 behind the ToR's bridge (::1);
// node n is ::1N. Its pods are 2001:2:0:10R::/64; node n routes the /124
// at ::N0, pod p being ::NP.
func rackNodeNet6(r int) netip.Prefix { return netip.PrefixFrom(v6(digits(r), 0), 64) }
func rackPodNet6(r int) netip.Prefix  { return netip.PrefixFrom(v6(digits(1, 0, r), 0), 64) }
func rackGateway6(r int) netip.Prefix { return netip.PrefixFrom(v6(digits(r), 1), 64) }
func nodeAddr6(r, n int) netip.Prefix {
	return netip.PrefixFrom(v6(digits(r), uint64(digits(1, n))), 64)
}
func podCIDR6(r, n int) netip.Prefix {
	return netip.PrefixFrom(v6(digits(1, 0, r), uint64(digits(n, 0))), 124)
}
func podAddr6(r, n, p int) netip.Addr { return v6(digits(1, 0, r), uint64(digits(n, p))) }
