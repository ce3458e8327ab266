package lab

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// The IPv4 addressing plan (plan6.go has the IPv6 one); doc.go explains
// it. Everything is inside 198.18.0.0/15 (RFC 2544 benchmarking space),
// which no real network routes, so nothing the lab sends can leave the
// machine by mistake.
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

// upper names a router above the ToRs: spine a (tierSpine), aggregation
// switch b of fabric pod a (tierAgg), super-spine a (tierSuper).
type upper struct{ tier, a, b int }

const (
	tierSpine = iota
	tierAgg
	tierSuper
)

// child names what hangs below an upper router: ToR a (b 0), or
// aggregation switch b of fabric pod a (below a super-spine).
type child struct{ a, b int }

// upperOctet is the third octet of u's /24 of router links: spine S's
// 198.18.S, aggregation switch A of fabric pod P's 198.18.PA, super-spine
// S's 198.18.10S.
func upperOctet(u upper) int {
	switch u.tier {
	case tierAgg:
		return 10*u.a + u.b
	case tierSuper:
		return 100 + u.a
	}
	return u.a
}

// upperLinks is u's /24 of router links: child c's /31 is .2i (u even, c
// odd), i being R-1 for ToR R and PA-1 for aggregation switch A of fabric
// pod P; the LB's is .254/31, the control plane's .252/31.
func upperLinks(u upper) netip.Prefix { return netip.PrefixFrom(v4(198, 18, upperOctet(u), 0), 24) }
func downLink(u upper, c child) (up, down netip.Prefix) {
	i := c.a - 1
	if c.b > 0 {
		i = 10*c.a + c.b - 1
	}
	return octetLink(u, 2*i)
}
func lbLink(u upper) (up, lb netip.Prefix) { return octetLink(u, 254) }
func cpLink(u upper) (up, cp netip.Prefix) { return octetLink(u, 252) }
func octetLink(u upper, d int) (a, b netip.Prefix) {
	o := upperOctet(u)
	return netip.PrefixFrom(v4(198, 18, o, d), 31), netip.PrefixFrom(v4(198, 18, o, d+1), 31)
}

// Rack r's nodes share 198.19.r.0/24 behind the ToR's bridge (.1); node n
// is .10+n. Its pods are 198.19.100+r.0/24; node n routes the /28 at
// .16n, pod p being .16n+p.
func rackNodeNet(r int) netip.Prefix { return netip.PrefixFrom(v4(198, 19, r, 0), 24) }
func rackPodNet(r int) netip.Prefix  { return netip.PrefixFrom(v4(198, 19, 100+r, 0), 24) }
func rackGateway(r int) netip.Prefix { return netip.PrefixFrom(v4(198, 19, r, 1), 24) }
func nodeAddr(r, n int) netip.Prefix { return netip.PrefixFrom(v4(198, 19, r, 10+n), 24) }
func podCIDR(r, n int) netip.Prefix  { return netip.PrefixFrom(v4(198, 19, 100+r, 16*n), 28) }
func podAddr(r, n, p int) netip.Addr { return v4(198, 19, 100+r, 16*n+p) }

// Names. Interface names live inside their own namespace, so they need no
// lab prefix and stay far below IFNAMSIZ (15): a link's end is named
// after the device at its other end.
func spineName(s int) string     { return fmt.Sprintf("spine%d", s) }
func aggName(p, a int) string    { return fmt.Sprintf("agg%d%d", p, a) }
func superName(s int) string     { return fmt.Sprintf("super%d", s) }
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
	fabric  *Fabric
	ns      []nsPlan
	bridges []bridgePlan
	vxlans  []vxlanPlan
	addrs   []addrPlan // on interfaces that are not veth ends: br0, lo, flannel.1
	links   []linkPlan
	routes  []routePlan
	neighs  []neighPlan
}

// vxlanPlan is a node's overlay device (Spec.Overlay).
type vxlanPlan struct {
	ns, dev string
	local   netip.Addr // the tunnel endpoint: the node's IPv4 address
	mac     net.HardwareAddr
}

// neighPlan is a permanent entry on an overlay device: with dst set, an
// FDB entry (the VTEP behind mac); else a neighbour entry (ip at mac).
type neighPlan struct {
	ns, dev string
	ip      netip.Addr
	mac     net.HardwareAddr
	fdb     bool
}

type nsPlan struct {
	name   string // namespace
	device string // "spine1", "n21"
	kind   string // KindSpine, KindToR, KindLB, ClassNode, ClassPod
}

type bridgePlan struct{ ns, dev string }

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
	addrs           []netip.Prefix // one per family, or none
	mtu             int            // 0: the default
}

type routePlan struct {
	ns  string
	dst netip.Prefix
	via []nexthop // more than one: ECMP
	// onlink: the gateway is reached on via's device without a route
	// to it (an overlay's remote tunnel address).
	onlink bool
}

// nexthop with an invalid gw is a link-scope route out of dev.
type nexthop struct {
	dev string
	gw  netip.Addr
}

// planner builds a plan step by step, numbering every device in every
// family the spec asks for.
type planner struct {
	*plan
	// nodes are the nodes planned so far: their index in Hosts, rack
	// and number.
	nodes  [][3]int
	spec   Spec
	fams   []*family
	spines []*Router   // two tiers
	aggs   [][]*Router // three tiers: [pod-1][agg-1]
	supers []*Router   // three tiers
	tors   []*Router
	lb     *Router
}

// parent is a router above the ToRs, with its number.
type parent struct {
	*Router
	u upper
}

// above are the routers ToR r links up to: every spine, or in three
// tiers its fabric pod's aggregation switches.
func (pl *planner) above(r int) []parent {
	if pl.spec.SuperSpines > 0 {
		p := pl.spec.podOf(r)
		return parents(pl.aggs[p-1], func(a int) upper { return upper{tierAgg, p, a} })
	}
	return parents(pl.spines, func(s int) upper { return upper{tierSpine, s, 0} })
}

// top are the routers the LB and the control plane hang off: the spines,
// or the super-spines.
func (pl *planner) top() []parent {
	if pl.spec.SuperSpines > 0 {
		return parents(pl.supers, func(s int) upper { return upper{tierSuper, s, 0} })
	}
	return parents(pl.spines, func(s int) upper { return upper{tierSpine, s, 0} })
}

func parents(rs []*Router, u func(i int) upper) []parent {
	out := make([]parent, len(rs))
	for i, r := range rs {
		out[i] = parent{r, u(i + 1)}
	}
	return out
}

func newPlan(spec Spec) *plan {
	pl := newPlanner(spec)
	for _, sp := range pl.top() {
		pl.spine(sp)
	}
	for p, aggs := range pl.aggs {
		for a := range aggs {
			pl.agg(p+1, a+1)
		}
	}
	for r := 1; r <= spec.Racks; r++ {
		pl.rack(r)
	}
	pl.lbLeaf()
	pl.controlPlaneLeaf()
	pl.overlay()
	routers := slices.Concat(pl.supers, slices.Concat(pl.aggs...), pl.spines, pl.tors)
	if pl.lb != nil {
		routers = append(routers, pl.lb)
	}
	for _, r := range routers {
		pl.fabric.Routers = append(pl.fabric.Routers, *r)
	}
	return pl.plan
}

// newPlanner adds the routers' namespaces and the control plane's.
func newPlanner(spec Spec) *planner {
	pl := &planner{plan: &plan{fabric: &Fabric{Spec: spec}}, spec: spec, fams: familiesOf(spec)}
	router := func(name, kind string) *Router {
		pl.addNS(name, kind)
		return &Router{Name: name, Kind: kind, Namespace: pl.nsOf(name)}
	}
	if spec.SuperSpines > 0 {
		for s := 1; s <= spec.SuperSpines; s++ {
			pl.supers = append(pl.supers, router(superName(s), KindSuper))
		}
		for p := 1; p <= spec.pods(); p++ {
			var aggs []*Router
			for a := 1; a <= spec.Spines; a++ {
				aggs = append(aggs, router(aggName(p, a), KindAgg))
			}
			pl.aggs = append(pl.aggs, aggs)
		}
	} else {
		for s := 1; s <= spec.Spines; s++ {
			pl.spines = append(pl.spines, router(spineName(s), KindSpine))
		}
	}
	for r := 1; r <= spec.Racks; r++ {
		pl.tors = append(pl.tors, router(torName(r), KindToR))
	}
	if spec.LB {
		pl.lb = router(KindLB, KindLB)
	}
	if spec.ControlPlane {
		pl.addNS(ControlPlaneName, ClassControlPlane)
		cp := &Host{Name: ControlPlaneName, Namespace: pl.nsOf(ControlPlaneName), Class: ClassControlPlane}
		for _, fam := range pl.fams {
			*fam.hostAddr(cp) = fam.cp
		}
		pl.fabric.ControlPlane = cp
	}
	return pl
}

func (pl *planner) nsOf(device string) string { return nsName(pl.spec.Prefix, device) }

func (pl *planner) addNS(device, kind string) {
	pl.plan.ns = append(pl.plan.ns, nsPlan{pl.nsOf(device), device, kind})
}

func (pl *planner) route(device string, dst netip.Prefix, via ...nexthop) {
	pl.routes = append(pl.routes, routePlan{ns: pl.nsOf(device), dst: dst, via: via})
}

// addr puts one address per family, addrs(fam), on dev.
func (pl *planner) addr(ns, dev string, addrs func(fam *family) netip.Prefix) {
	for _, fam := range pl.fams {
		pl.addrs = append(pl.addrs, addrPlan{ns, dev, addrs(fam)})
	}
}

// spine links a top router (a spine, or a super-spine) to what hangs
// below it: every ToR, or every aggregation switch, then the LB and the
// control plane, and routes each one's prefixes down its link; a
// super-spine routes each rack by ECMP over its fabric pod's
// aggregation switches.
func (pl *planner) spine(sp parent) {
	if sp.u.tier == tierSuper {
		for p, aggs := range pl.aggs {
			for a, agg := range aggs {
				pl.routerLink(sp.Router, agg,
					func(fam *family) (netip.Prefix, netip.Prefix) { return fam.downLink(sp.u, child{p + 1, a + 1}) },
					func(*family) []netip.Prefix { return nil })
			}
		}
		for _, fam := range pl.fams {
			for r := 1; r <= pl.spec.Racks; r++ {
				p := pl.spec.podOf(r)
				var via []nexthop
				for a, agg := range pl.aggs[p-1] {
					_, down := fam.downLink(sp.u, child{p, a + 1})
					via = append(via, nexthop{agg.Name, down.Addr()})
				}
				for _, dst := range pl.rackNets(fam, r) {
					pl.route(sp.Name, dst, via...)
				}
			}
		}
	} else {
		for r := 1; r <= pl.spec.Racks; r++ {
			pl.routerLink(sp.Router, pl.tors[r-1],
				func(fam *family) (netip.Prefix, netip.Prefix) { return fam.downLink(sp.u, child{r, 0}) },
				func(fam *family) []netip.Prefix { return pl.rackNets(fam, r) })
		}
	}
	if pl.lb != nil {
		pl.routerLink(sp.Router, pl.lb,
			func(fam *family) (netip.Prefix, netip.Prefix) { return fam.lbLink(sp.u) },
			func(fam *family) []netip.Prefix { return []netip.Prefix{fam.lbNet} })
	}
	if cp := pl.fabric.ControlPlane; cp != nil {
		// The control plane is a host: the inventory lists no interfaces
		// of its own.
		pl.routerLink(sp.Router, &Router{Name: cp.Name, Namespace: cp.Namespace},
			func(fam *family) (netip.Prefix, netip.Prefix) { return fam.cpLink(sp.u) },
			func(fam *family) []netip.Prefix { return []netip.Prefix{fam.cpNet} })
	}
}

// agg links aggregation switch a of fabric pod p (three tiers) to its
// pod's ToRs, routing their racks down, and routes the rest up by ECMP
// over the super-spines.
func (pl *planner) agg(p, a int) {
	u := upper{tierAgg, p, a}
	agg := pl.aggs[p-1][a-1]
	var others []int
	for r := 1; r <= pl.spec.Racks; r++ {
		if pl.spec.podOf(r) != p {
			others = append(others, r)
			continue
		}
		pl.routerLink(agg, pl.tors[r-1],
			func(fam *family) (netip.Prefix, netip.Prefix) { return fam.downLink(u, child{r, 0}) },
			func(fam *family) []netip.Prefix { return pl.rackNets(fam, r) })
	}
	pl.uplinks(agg.Name, pl.top(),
		func(fam *family, sp parent) netip.Addr { up, _ := fam.downLink(sp.u, child{p, a}); return up.Addr() },
		func(fam *family) []netip.Prefix {
			var nets []netip.Prefix
			for _, r := range others {
				nets = append(nets, pl.rackNets(fam, r)...)
			}
			return append(nets, pl.leafNets(fam, "")...)
		})
}

// routerLink links spine sp to leaf (a ToR, the LB, the control plane),
// numbered by ends (spine end first), and routes down(fam) from the
// spine to the leaf. Each end is named after the device at the other.
func (pl *planner) routerLink(sp, leaf *Router, ends func(*family) (netip.Prefix, netip.Prefix), down func(*family) []netip.Prefix) {
	spIf, leafIf := Interface{Name: leaf.Name, Peer: leaf.Name}, Interface{Name: sp.Name, Peer: sp.Name}
	a, b := linkEnd{ns: sp.Namespace, dev: leaf.Name}, linkEnd{ns: leaf.Namespace, dev: sp.Name}
	for _, fam := range pl.fams {
		sa, la := ends(fam)
		a.addrs, b.addrs = append(a.addrs, sa), append(b.addrs, la)
		*fam.ifAddr(&spIf), *fam.ifAddr(&leafIf) = sa, la
	}
	pl.links = append(pl.links, linkPlan{a: a, b: b})
	sp.Interfaces = append(sp.Interfaces, spIf)
	leaf.Interfaces = append(leaf.Interfaces, leafIf)
	for _, fam := range pl.fams {
		_, la := ends(fam)
		for _, dst := range down(fam) {
			pl.route(sp.Name, dst, nexthop{leaf.Name, la.Addr()})
		}
	}
}

// uplinks routes a device below routers ups (a ToR, an aggregation
// switch, the LB, the control plane) up: each one's link net via that
// one, and dsts(fam) by ECMP over all. gw(fam, sp) is sp's end of the
// device's link.
func (pl *planner) uplinks(device string, ups []parent, gw func(fam *family, sp parent) netip.Addr, dsts func(fam *family) []netip.Prefix) {
	for _, fam := range pl.fams {
		up := make([]nexthop, len(ups))
		for i, sp := range ups {
			up[i] = nexthop{sp.Name, gw(fam, sp)}
			pl.route(device, fam.upperLinks(sp.u), up[i])
		}
		for _, dst := range dsts(fam) {
			pl.route(device, dst, up...)
		}
	}
}

// leafNets returns the LB's and the control plane's nets that exist,
// but not skip's.
func (pl *planner) leafNets(fam *family, skip string) []netip.Prefix {
	var nets []netip.Prefix
	if pl.lb != nil && skip != KindLB {
		nets = append(nets, fam.lbNet)
	}
	if pl.fabric.ControlPlane != nil && skip != ControlPlaneName {
		nets = append(nets, fam.cpNet)
	}
	return nets
}

// racksBut returns every rack's prefixes but rack skip's.
func (pl *planner) racksBut(fam *family, skip int) []netip.Prefix {
	var nets []netip.Prefix
	for r := 1; r <= pl.spec.Racks; r++ {
		if r != skip {
			nets = append(nets, pl.rackNets(fam, r)...)
		}
	}
	return nets
}

// rackNets are the prefixes the routers route to rack r: its nodes' and
// its pods', or on an overlay its nodes' alone.
func (pl *planner) rackNets(fam *family, r int) []netip.Prefix {
	if pl.spec.Overlay {
		return []netip.Prefix{fam.rackNodes(r)}
	}
	return fam.rackPrefixes(r)
}

// rack plans ToR r's routes up, its bridge, and the rack's nodes.
func (pl *planner) rack(r int) {
	tor := pl.tors[r-1]
	pl.uplinks(tor.Name, pl.above(r),
		func(fam *family, sp parent) netip.Addr { up, _ := fam.downLink(sp.u, child{r, 0}); return up.Addr() },
		func(fam *family) []netip.Prefix { return append(pl.racksBut(fam, r), pl.leafNets(fam, "")...) })
	pl.bridges = append(pl.bridges, bridgePlan{ns: tor.Namespace, dev: bridgeName})
	pl.addr(tor.Namespace, bridgeName, func(fam *family) netip.Prefix { return fam.gateway(r) })
	br := Interface{Name: bridgeName}
	for _, fam := range pl.fams {
		*fam.ifAddr(&br) = fam.gateway(r)
	}
	tor.Interfaces = append(tor.Interfaces, br)
	for n := 1; n <= pl.spec.NodesPerRack; n++ {
		pl.node(tor, r, n)
	}
}

// node plans node n of rack r, a port of its ToR's bridge routing the
// lab range to the ToR, and its pods.
func (pl *planner) node(tor *Router, r, n int) {
	node := Host{
		Name: nodeName(r, n), Namespace: pl.nsOf(nodeName(r, n)),
		Rack: rackName(r), Zone: zoneName(pl.spec.zoneOf(r)), Node: nodeName(r, n), Class: ClassNode,
	}
	eth := linkEnd{ns: node.Namespace, dev: hostIf}
	for _, fam := range pl.fams {
		a := fam.node(r, n)
		*fam.hostAddr(&node) = a.Addr()
		eth.addrs = append(eth.addrs, a)
	}
	pl.addNS(node.Name, ClassNode)
	pl.links = append(pl.links, linkPlan{a: eth, b: linkEnd{ns: tor.Namespace, dev: node.Name, master: bridgeName}})
	for _, fam := range pl.fams {
		pl.route(node.Name, fam.lab, nexthop{hostIf, fam.gateway(r).Addr()})
	}
	if pl.spec.PodsPerNode > 0 || pl.spec.PodCIDRs {
		for _, fam := range pl.fams {
			if !pl.spec.Overlay {
				pl.route(tor.Name, fam.podCIDR(r, n), nexthop{bridgeName, *fam.hostAddr(&node)})
			}
			*fam.hostPodCIDR(&node) = fam.podCIDR(r, n)
		}
	}
	f := pl.fabric
	pl.nodes = append(pl.nodes, [3]int{len(f.Hosts), r, n})
	f.Hosts = append(f.Hosts, node)
	for _, fam := range pl.fams {
		_, _, backends := fam.lbFields(f)
		*backends = append(*backends, *fam.hostAddr(&node))
	}
	for q := 1; q <= pl.spec.PodsPerNode; q++ {
		pl.pod(node, r, n, q)
	}
}

// pod plans pod q of node n: a namespace behind the node over a veth,
// routed as a CNI such as Calico does it. The pod's gateway is its
// node's own address, reached on-link over the pod's veth, as Calico does
// with 169.254.1.1; the node routes the pod's address to the veth.
func (pl *planner) pod(node Host, r, n, q int) {
	pod := Host{
		Name: podName(r, n, q), Namespace: pl.nsOf(podName(r, n, q)),
		Rack: node.Rack, Zone: node.Zone, Node: node.Name, Class: ClassPod,
	}
	podIf := fmt.Sprintf("p%d", q)
	eth, veth := linkEnd{ns: pod.Namespace, dev: hostIf}, linkEnd{ns: node.Namespace, dev: podIf}
	if pl.spec.Overlay {
		eth.mtu, veth.mtu = OverlayMTU, OverlayMTU
	}
	for _, fam := range pl.fams {
		*fam.hostAddr(&pod) = fam.pod(r, n, q)
		eth.addrs = append(eth.addrs, fam.host(fam.pod(r, n, q)))
		if fam.gatewayOnPodVeth {
			veth.addrs = append(veth.addrs, fam.host(*fam.hostAddr(&node)))
		}
	}
	pl.fabric.Hosts = append(pl.fabric.Hosts, pod)
	pl.addNS(pod.Name, ClassPod)
	pl.links = append(pl.links, linkPlan{a: eth, b: veth})
	for _, fam := range pl.fams {
		gw := *fam.hostAddr(&node)
		pl.route(node.Name, fam.host(*fam.hostAddr(&pod)), nexthop{dev: podIf})
		pl.route(pod.Name, fam.host(gw), nexthop{dev: hostIf})
		pl.route(pod.Name, fam.lab, nexthop{hostIf, gw})
	}
}

// lbLeaf plans the LB's routes up and its addresses on lo: the VIP and
// the source address it SNATs to.
func (pl *planner) lbLeaf() {
	f, lb := pl.fabric, pl.lb
	if lb == nil {
		f.Backends, f.Backends6 = nil, nil
		return
	}
	pl.uplinks(lb.Name, pl.top(),
		func(fam *family, sp parent) netip.Addr { up, _ := fam.lbLink(sp.u); return up.Addr() },
		func(fam *family) []netip.Prefix { return append(pl.racksBut(fam, 0), pl.leafNets(fam, KindLB)...) })
	vip, src := Interface{Name: "lo"}, Interface{Name: "lo"}
	for _, fam := range pl.fams {
		*fam.ifAddr(&vip), *fam.ifAddr(&src) = fam.host(fam.vip), fam.host(fam.lbSrc)
		fvip, fsrc, backends := fam.lbFields(f)
		*fvip, *fsrc = fam.vip, fam.lbSrc
		if f.ControlPlane != nil {
			*backends = []netip.Addr{fam.cp}
		}
	}
	for _, ifc := range []Interface{vip, src} {
		pl.addr(lb.Namespace, "lo", func(fam *family) netip.Prefix { return *fam.ifAddr(&ifc) })
		lb.Interfaces = append(lb.Interfaces, ifc)
	}
}

// controlPlaneLeaf plans the control plane's routes up and its address
// on lo.
func (pl *planner) controlPlaneLeaf() {
	cp := pl.fabric.ControlPlane
	if cp == nil {
		return
	}
	pl.uplinks(cp.Name, pl.top(),
		func(fam *family, sp parent) netip.Addr { up, _ := fam.cpLink(sp.u); return up.Addr() },
		func(fam *family) []netip.Prefix {
			return append(pl.racksBut(fam, 0), pl.leafNets(fam, ControlPlaneName)...)
		})
	pl.addr(cp.Namespace, "lo", func(fam *family) netip.Prefix { return fam.host(fam.cp) })
}

// The overlay's constants, flannel's vxlan backend's.
const (
	overlayDev  = "flannel.1"
	overlayVNI  = 1
	overlayPort = 8472
	// OverlayMTU is the pods': 1500 less VXLAN's 50 bytes.
	OverlayMTU = 1450
)

// LinkMTU is every link's between routers: the kernel's default, which
// Clear restores after an mtu fault.
const LinkMTU = 1500

// overlayMAC is node (r, n)'s overlay device address: locally
// administered, unique in the lab.
func overlayMAC(r, n int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x00, 0xc6, 0x13, byte(r), byte(n)}
}

// overlay plans Spec.Overlay: on every node a VXLAN device holding the
// first address of its pod CIDR (per family), and for every other node
// its pod CIDR routed via that node's tunnel address on the device, the
// neighbour entry for that address and the FDB entry that sends its MAC
// to the node's IPv4 address, all static, as flannel writes them from
// the Node objects.
func (pl *planner) overlay() {
	if !pl.spec.Overlay {
		return
	}
	type node struct {
		h    *Host
		r, n int
	}
	var nodes []node
	for _, x := range pl.nodes {
		h := &pl.fabric.Hosts[x[0]]
		for _, fam := range pl.fams {
			*fam.tunnel(h) = fam.podCIDR(x[1], x[2]).Addr()
		}
		nodes = append(nodes, node{h, x[1], x[2]})
	}
	for _, a := range nodes {
		pl.vxlans = append(pl.vxlans, vxlanPlan{ns: a.h.Namespace, dev: overlayDev, local: a.h.Addr, mac: overlayMAC(a.r, a.n)})
		pl.addr(a.h.Namespace, overlayDev, func(fam *family) netip.Prefix { return fam.host(*fam.tunnel(a.h)) })
		for _, b := range nodes {
			if b.h == a.h {
				continue
			}
			mac := overlayMAC(b.r, b.n)
			pl.neighs = append(pl.neighs, neighPlan{ns: a.h.Namespace, dev: overlayDev, ip: b.h.Addr, mac: mac, fdb: true})
			for _, fam := range pl.fams {
				gw := *fam.tunnel(b.h)
				pl.neighs = append(pl.neighs, neighPlan{ns: a.h.Namespace, dev: overlayDev, ip: gw, mac: mac})
				// The tunnel address on the device first: IPv6 refuses
				// an on-link gateway that a route out of another device
				// (the lab's, over eth0) covers.
				pl.routes = append(pl.routes,
					routePlan{ns: a.h.Namespace, dst: fam.host(gw), via: []nexthop{{dev: overlayDev}}},
					routePlan{ns: a.h.Namespace, dst: fam.podCIDR(b.r, b.n), via: []nexthop{{overlayDev, gw}}, onlink: true})
			}
		}
	}
}
