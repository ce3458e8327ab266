package lab

import (
	"net/netip"

	"github.com/netprober/prober/api"
)

// IP families, also the values of Fault.Family: api's vocabulary.
const (
	FamilyIPv4 = api.FamilyIPv4
	FamilyIPv6 = api.FamilyIPv6
)

// family is one IP family's addressing plan: what newPlan numbers every
// device with, in 198.18.0.0/15 (plan.go) or 2001:2::/48 (plan6.go).
// The two plans have the same shape, so one planner builds both.
type family struct {
	name string // FamilyIPv4, FamilyIPv6
	lab  netip.Prefix

	upperLinks     func(u upper) netip.Prefix                     // u's router links
	downLink       func(u upper, c child) (up, down netip.Prefix) // u <-> a ToR or aggregation switch below it
	lbLink, cpLink func(u upper) (up, leaf netip.Prefix)          // u <-> LB, control plane
	rackNodes      func(r int) netip.Prefix                       // rack r's node segment
	rackPods       func(r int) netip.Prefix                       // rack r's pods
	gateway        func(r int) netip.Prefix                       // the ToR's br0
	node           func(r, n int) netip.Prefix                    // a node's eth0
	podCIDR        func(r, n int) netip.Prefix                    // routed to the node
	pod            func(r, n, p int) netip.Addr

	podRange       netip.Prefix // every rack's pods
	lbNet, cpNet   netip.Prefix
	vip, lbSrc, cp netip.Addr

	// gatewayOnPodVeth gives a node's own address also to its pod-facing
	// veths. A pod's gateway is its node's address, on-link; ARP answers
	// for any local address, but IPv6 neighbor discovery only for an
	// address on the interface the solicitation came in on.
	gatewayOnPodVeth bool
}

var ipv4 = &family{
	name: FamilyIPv4, lab: LabRange,
	upperLinks: upperLinks, downLink: downLink, lbLink: lbLink, cpLink: cpLink,
	rackNodes: rackNodeNet, rackPods: rackPodNet, gateway: rackGateway,
	node: nodeAddr, podCIDR: podCIDR, pod: podAddr,
	podRange: PodRange, lbNet: lbNet, cpNet: cpNet, vip: vipAddr, lbSrc: lbSrcAddr, cp: cpAddr,
}

var ipv6 = &family{
	name: FamilyIPv6, lab: LabRange6,
	upperLinks: upperLinks6, downLink: downLink6, lbLink: lbLink6, cpLink: cpLink6,
	rackNodes: rackNodeNet6, rackPods: rackPodNet6, gateway: rackGateway6,
	node: nodeAddr6, podCIDR: podCIDR6, pod: podAddr6,
	podRange: PodRange6, lbNet: lbNet6, cpNet: cpNet6, vip: vipAddr6, lbSrc: lbSrcAddr6, cp: cpAddr6,
	gatewayOnPodVeth: true,
}

// familiesOf returns the families spec numbers: IPv4, and IPv6 with
// Spec.IPv6.
func familiesOf(spec Spec) []*family {
	if spec.IPv6 {
		return []*family{ipv4, ipv6}
	}
	return []*family{ipv4}
}

func (fam *family) is6() bool { return fam.name == FamilyIPv6 }

// host is a as a single-address prefix: /32 or /128.
func (fam *family) host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

func (fam *family) rackPrefixes(r int) []netip.Prefix {
	return []netip.Prefix{fam.rackNodes(r), fam.rackPods(r)}
}

// The inventory keeps each family in fields of its own (Addr, Addr6);
// these return the one fam fills.

func (fam *family) hostAddr(h *Host) *netip.Addr {
	if fam.is6() {
		return &h.Addr6
	}
	return &h.Addr
}

func (fam *family) hostPodCIDR(h *Host) *netip.Prefix {
	if fam.is6() {
		return &h.PodCIDR6
	}
	return &h.PodCIDR
}

func (fam *family) tunnel(h *Host) *netip.Addr {
	if fam.is6() {
		return &h.Tunnel6
	}
	return &h.Tunnel
}

func (fam *family) ifAddr(i *Interface) *netip.Prefix {
	if fam.is6() {
		return &i.Addr6
	}
	return &i.Addr
}

// lbFields returns the VIP, the LB's source address and the backends.
func (fam *family) lbFields(f *Fabric) (vip, src *netip.Addr, backends *[]netip.Addr) {
	if fam.is6() {
		return &f.VIP6, &f.LBSource6, &f.Backends6
	}
	return &f.VIP, &f.LBSource, &f.Backends
}
