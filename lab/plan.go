package lab

import (
	"fmt"
	"net/netip"
)

// The addressing plan; doc.go explains it. Everything is inside
// 198.18.0.0/15 (RFC 2544 benchmarking space), which no real network
// routes, so nothing the lab sends can leave the machine by mistake.
var (
	// LabRange is the only range the lab numbers from.
	LabRange  = netip.MustParsePrefix("198.18.0.0/15")
	lbNet     = netip.MustParsePrefix("198.19.250.0/24")
	vipAddr   = netip.MustParseAddr("198.19.250.10")
	lbSrcAddr = netip.MustParseAddr("198.19.250.11")
	cpNet     = netip.MustParsePrefix("198.19.251.0/24")
	cpAddr    = netip.MustParseAddr("198.19.251.10")
	// PodRange holds every rack's pod network (198.19.101.0/24 ..
	// 198.19.109.0/24): a cluster's pod CIDR.
	PodRange = netip.MustParsePrefix("198.19.96.0/20")
)

// APIServerPort is the port the VIP forwards to the control plane.
const APIServerPort = 6443

func v4(a, b, c, d int) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a), byte(b), byte(c), byte(d)})
}

// spineLinkNet is spine s's /24 of router links: ToR r's /31 is
// .2(r-1)/31 (spine even, ToR odd), the LB's .254/31.
func spineLinkNet(s int) netip.Prefix { return netip.PrefixFrom(v4(198, 18, s, 0), 24) }
func torLink(s, r int) (spine, tor netip.Prefix) {
	return netip.PrefixFrom(v4(198, 18, s, 2*(r-1)), 31), netip.PrefixFrom(v4(198, 18, s, 2*(r-1)+1), 31)
}
func lbLink(s int) (spine, lb netip.Prefix) {
	return netip.PrefixFrom(v4(198, 18, s, 254), 31), netip.PrefixFrom(v4(198, 18, s, 255), 31)
}
func cpLink(s int) (spine, cp netip.Prefix) {
	return netip.PrefixFrom(v4(198, 18, s, 252), 31), netip.PrefixFrom(v4(198, 18, s, 253), 31)
}

// Rack r's nodes share 198.19.r.0/24 behind the ToR's bridge (.1); node n
// is .10+n. Its pods are 198.19.100+r.0/24; node n routes the /28 at
// .16n, pod p being .16n+p.
func rackNodeNet(r int) netip.Prefix    { return netip.PrefixFrom(v4(198, 19, r, 0), 24) }
func rackPodNet(r int) netip.Prefix     { return netip.PrefixFrom(v4(198, 19, 100+r, 0), 24) }
func rackGateway(r int) netip.Prefix    { return netip.PrefixFrom(v4(198, 19, r, 1), 24) }
func nodeAddr(r, n int) netip.Prefix    { return netip.PrefixFrom(v4(198, 19, r, 10+n), 24) }
func podCIDR(r, n int) netip.Prefix     { return netip.PrefixFrom(v4(198, 19, 100+r, 16*n), 28) }
func podAddr(r, n, p int) netip.Addr    { return v4(198, 19, 100+r, 16*n+p) }
func rackPrefixes(r int) []netip.Prefix { return []netip.Prefix{rackNodeNet(r), rackPodNet(r)} }

// Names. Interface names live inside their own namespace, so they need no
// lab prefix and stay far below IFNAMSIZ (15): a link's end is named
// after the device at its other end.
func spineName(s int) string     { return fmt.Sprintf("spine%d", s) }
func torName(r int) string       { return fmt.Sprintf("tor%d", r) }
func nodeName(r, n int) string   { return fmt.Sprintf("n%d%d", r, n) }
func podName(r, n, p int) string { return fmt.Sprintf("n%d%dp%d", r, n, p) }
func rackName(r int) string      { return fmt.Sprintf("r%d", r) }
func zoneName(z int) string      { return fmt.Sprintf("z%d", z) }

const (
	bridgeName = "br0"  // the rack's L2 segment in the ToR
	hostIf     = "eth0" // a node's or pod's own NIC
	// ControlPlaneName names the control plane's namespace: <prefix>-cp.
	ControlPlaneName = "cp"
)

func nsName(prefix, device string) string { return prefix + "-" + device }

// plan is everything Up creates, computed without touching the kernel.
type plan struct {
	fabric *Fabric
	ns     []nsPlan
	addrs  []addrPlan // on interfaces that are not veth ends: br0, lo
	links  []linkPlan
	routes []routePlan
}

type nsPlan struct {
	name   string // namespace
	device string // "spine1", "n21"
	kind   string // KindSpine, KindToR, KindLB, ClassNode, ClassPod
}

type addrPlan struct {
	ns, dev string
	addr    netip.Prefix
}

// linkPlan is a veth pair; an end with a master is enslaved to that bridge.
type linkPlan struct {
	a, b linkEnd
}

type linkEnd struct {
	ns, dev, master string
	addr            netip.Prefix // invalid: no address
}

type routePlan struct {
	ns  string
	dst netip.Prefix
	via []nexthop // more than one: ECMP
}

// nexthop with an invalid gw is a link-scope route out of dev.
type nexthop struct {
	dev string
	gw  netip.Addr
}

func newPlan(spec Spec) *plan {
	p := &plan{fabric: &Fabric{Spec: spec}}
	f := p.fabric
	ns := func(device string) string { return nsName(spec.Prefix, device) }
	addNS := func(device, kind string) { p.ns = append(p.ns, nsPlan{ns(device), device, kind}) }
	route := func(device string, dst netip.Prefix, via ...nexthop) {
		p.routes = append(p.routes, routePlan{ns(device), dst, via})
	}

	spines := make([]*Router, spec.Spines)
	for s := 1; s <= spec.Spines; s++ {
		addNS(spineName(s), KindSpine)
		spines[s-1] = &Router{Name: spineName(s), Kind: KindSpine, Namespace: ns(spineName(s))}
	}
	tors := make([]*Router, spec.Racks)
	for r := 1; r <= spec.Racks; r++ {
		addNS(torName(r), KindToR)
		tors[r-1] = &Router{Name: torName(r), Kind: KindToR, Namespace: ns(torName(r))}
	}
	var lb *Router
	if spec.LB {
		addNS(KindLB, KindLB)
		lb = &Router{Name: KindLB, Kind: KindLB, Namespace: ns(KindLB)}
	}
	if spec.ControlPlane {
		addNS(ControlPlaneName, ClassControlPlane)
		f.ControlPlane = &Host{Name: ControlPlaneName, Namespace: ns(ControlPlaneName), Addr: cpAddr, Class: ClassControlPlane}
	}
	// leafUp routes a spine-attached leaf (the LB, the control plane):
	// each spine's link net via that spine, every rack and the other
	// leaves' nets by ECMP over all spines.
	leafUp := func(leaf string, link func(s int) (netip.Prefix, netip.Prefix), others ...netip.Prefix) {
		up := make([]nexthop, spec.Spines)
		for s := 1; s <= spec.Spines; s++ {
			sa, _ := link(s)
			up[s-1] = nexthop{spineName(s), sa.Addr()}
			route(leaf, spineLinkNet(s), up[s-1])
		}
		for r := 1; r <= spec.Racks; r++ {
			for _, dst := range rackPrefixes(r) {
				route(leaf, dst, up...)
			}
		}
		for _, dst := range others {
			route(leaf, dst, up...)
		}
	}

	// Router links and the spines' routes down to the racks.
	for s := 1; s <= spec.Spines; s++ {
		sp := spines[s-1]
		for r := 1; r <= spec.Racks; r++ {
			sa, ta := torLink(s, r)
			p.links = append(p.links, linkPlan{
				a: linkEnd{ns: sp.Namespace, dev: torName(r), addr: sa},
				b: linkEnd{ns: tors[r-1].Namespace, dev: spineName(s), addr: ta},
			})
			sp.Interfaces = append(sp.Interfaces, Interface{Name: torName(r), Addr: sa, Peer: torName(r)})
			tors[r-1].Interfaces = append(tors[r-1].Interfaces, Interface{Name: spineName(s), Addr: ta, Peer: spineName(s)})
			for _, dst := range rackPrefixes(r) {
				route(sp.Name, dst, nexthop{torName(r), ta.Addr()})
			}
		}
		if lb != nil {
			sa, la := lbLink(s)
			p.links = append(p.links, linkPlan{
				a: linkEnd{ns: sp.Namespace, dev: KindLB, addr: sa},
				b: linkEnd{ns: lb.Namespace, dev: spineName(s), addr: la},
			})
			sp.Interfaces = append(sp.Interfaces, Interface{Name: KindLB, Addr: sa, Peer: KindLB})
			lb.Interfaces = append(lb.Interfaces, Interface{Name: spineName(s), Addr: la, Peer: spineName(s)})
			route(sp.Name, lbNet, nexthop{KindLB, la.Addr()})
		}
		if cp := f.ControlPlane; cp != nil {
			sa, ca := cpLink(s)
			p.links = append(p.links, linkPlan{
				a: linkEnd{ns: sp.Namespace, dev: cp.Name, addr: sa},
				b: linkEnd{ns: cp.Namespace, dev: spineName(s), addr: ca},
			})
			sp.Interfaces = append(sp.Interfaces, Interface{Name: cp.Name, Addr: sa, Peer: cp.Name})
			route(sp.Name, cpNet, nexthop{cp.Name, ca.Addr()})
		}
	}

	// ToRs: ECMP up to every other rack and the LB over all spines, the
	// spines' link nets via that spine, the rack's pod CIDRs via their node.
	for r := 1; r <= spec.Racks; r++ {
		tor := tors[r-1]
		up := make([]nexthop, spec.Spines)
		for s := 1; s <= spec.Spines; s++ {
			sa, _ := torLink(s, r)
			up[s-1] = nexthop{spineName(s), sa.Addr()}
			route(tor.Name, spineLinkNet(s), up[s-1])
		}
		for o := 1; o <= spec.Racks; o++ {
			if o == r {
				continue
			}
			for _, dst := range rackPrefixes(o) {
				route(tor.Name, dst, up...)
			}
		}
		if lb != nil {
			route(tor.Name, lbNet, up...)
		}
		if f.ControlPlane != nil {
			route(tor.Name, cpNet, up...)
		}
		p.addrs = append(p.addrs, addrPlan{tor.Namespace, bridgeName, rackGateway(r)})
		tor.Interfaces = append(tor.Interfaces, Interface{Name: bridgeName, Addr: rackGateway(r)})

		for n := 1; n <= spec.NodesPerRack; n++ {
			node := Host{
				Name: nodeName(r, n), Namespace: ns(nodeName(r, n)), Addr: nodeAddr(r, n).Addr(),
				Rack: rackName(r), Zone: zoneName(spec.zoneOf(r)), Node: nodeName(r, n), Class: ClassNode,
			}
			f.Hosts = append(f.Hosts, node)
			f.Backends = append(f.Backends, node.Addr)
			addNS(node.Name, ClassNode)
			p.links = append(p.links, linkPlan{
				a: linkEnd{ns: node.Namespace, dev: hostIf, addr: nodeAddr(r, n)},
				b: linkEnd{ns: tor.Namespace, dev: node.Name, master: bridgeName},
			})
			route(node.Name, LabRange, nexthop{hostIf, rackGateway(r).Addr()})
			if spec.PodsPerNode > 0 || spec.PodCIDRs {
				route(tor.Name, podCIDR(r, n), nexthop{bridgeName, node.Addr})
				f.Hosts[len(f.Hosts)-1].PodCIDR = podCIDR(r, n)
			}
			// A pod's gateway is its node's own address, reached on-link
			// over the pod's veth, as Calico does with 169.254.1.1: the
			// node's pod-facing veths need no addresses of their own.
			for q := 1; q <= spec.PodsPerNode; q++ {
				pod := Host{
					Name: podName(r, n, q), Namespace: ns(podName(r, n, q)), Addr: podAddr(r, n, q),
					Rack: node.Rack, Zone: node.Zone, Node: node.Name, Class: ClassPod,
				}
				f.Hosts = append(f.Hosts, pod)
				addNS(pod.Name, ClassPod)
				podIf := fmt.Sprintf("p%d", q)
				p.links = append(p.links, linkPlan{
					a: linkEnd{ns: pod.Namespace, dev: hostIf, addr: netip.PrefixFrom(pod.Addr, 32)},
					b: linkEnd{ns: node.Namespace, dev: podIf},
				})
				route(node.Name, netip.PrefixFrom(pod.Addr, 32), nexthop{dev: podIf})
				route(pod.Name, netip.PrefixFrom(node.Addr, 32), nexthop{dev: hostIf})
				route(pod.Name, LabRange, nexthop{hostIf, node.Addr})
			}
		}
	}

	if lb != nil {
		var others []netip.Prefix
		if f.ControlPlane != nil {
			others = append(others, cpNet)
		}
		leafUp(lb.Name, lbLink, others...)
		for _, a := range []netip.Addr{vipAddr, lbSrcAddr} {
			pfx := netip.PrefixFrom(a, 32)
			p.addrs = append(p.addrs, addrPlan{lb.Namespace, "lo", pfx})
			lb.Interfaces = append(lb.Interfaces, Interface{Name: "lo", Addr: pfx})
		}
		f.VIP, f.LBSource = vipAddr, lbSrcAddr
		if f.ControlPlane != nil {
			f.Backends = []netip.Addr{cpAddr}
		}
	} else {
		f.Backends = nil
	}
	if cp := f.ControlPlane; cp != nil {
		var others []netip.Prefix
		if lb != nil {
			others = append(others, lbNet)
		}
		leafUp(cp.Name, cpLink, others...)
		p.addrs = append(p.addrs, addrPlan{cp.Namespace, "lo", netip.PrefixFrom(cp.Addr, 32)})
	}

	for _, sp := range spines {
		f.Routers = append(f.Routers, *sp)
	}
	for _, t := range tors {
		f.Routers = append(f.Routers, *t)
	}
	if lb != nil {
		f.Routers = append(f.Routers, *lb)
	}
	return p
}
