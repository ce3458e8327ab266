// Package matrixsim simulates a leaf-spine fabric, or a three-tier Clos,
// probed by prober's agents and produces what they would report:
// per-flow probe counts and Paris-traceroute paths as
// []api.Observations, under injected faults. It sends nothing; its
// numbering mirrors the lab's (198.18.0.0/15) so that outputs read like
// the real thing. It is for tests and benchmarks of package matrix only.
package matrixsim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/netprober/prober/api"
)

// Config shapes the fabric and the probing.
type Config struct {
	Racks, NodesPerRack, Spines int
	// LB adds a load balancer attached to every spine, with a VIP that
	// every agent probes; its backends are the first node of the first
	// four racks.
	LB bool
	// LBNoBackends: the agents list no backends for the VIP, as for an
	// API server whose hosts are no peers.
	LBNoBackends bool
	// ClusterIP, when set, adds the Kubernetes API server's Service
	// (ServiceName, class lb, path node_to_lb, tcp_syn only), which every
	// agent probes at this address. kube-proxy DNATs it on the source
	// node to the first node's API server, so no device sits at the VIP
	// and Hops does not map it: a trace follows the path to that node and
	// its last hop answers as the ClusterIP; the node's own trace to it
	// is that one hop.
	ClusterIP string
	// Flat puts every node on one L2 segment (Racks must be 1, no LB):
	// the switch does not answer traces, so a trace to another node
	// shows one hop, that node. Nodes carry no rack label and Hops is
	// empty. The switch still drops what ToRLoss says.
	Flat bool
	// Pods adds a pod agent per node (NodesPerRack at most 14), as the
	// prober-pod DaemonSet runs: its first hop is its node, answering
	// from the CNI's gateway address in the pod's CIDR, which Hops does
	// not map. It probes its own node, its rack-mates and node i of the
	// other racks, the pods of those nodes, and the ClusterIP Service.
	// Nodes do not probe pods. The ToR routes pod CIDRs: a pod's trace
	// to a rack-mate's pod shows the ToR, its node and the pod.
	Pods bool
	// L2Racks makes each rack one L2 segment that its ToR switches
	// without answering traces, as the lab's ToR bridges do: a trace to
	// a rack-mate node shows that node only. The ToR still drops what
	// ToRLoss says.
	L2Racks bool
	// NoRackLabels leaves the rack label off every node and pod, as on
	// a cluster without one: the matrix then groups nodes by the first
	// hop their agents report (every agent reports it: a node its ToR's
	// host-facing address, a pod its node's CNI gateway).
	NoRackLabels bool
	// LargeEvery, when positive, gives every tcp_syn target the large
	// probes of probing.pmtu: ProbesPerFlow/LargeEvery a flow (at least
	// one), reported as tcp_syn_mtu, lost where an MTUBlackhole's link
	// lies on the flow's way out, else as its small probes are.
	LargeEvery int
	// Untraced reports no traced path for any flow, as with tracing
	// off: only the rules and the tier stage can localize.
	Untraced bool
	// ReplyPerProbe draws each probe's reply spine afresh, as on an IPv6
	// fabric that hashes the flow label when the target labels each
	// SYN-ACK anew (Linux does, unless it reflects labels); else a flow's
	// replies keep one spine, as its own 5-tuple hashes.
	ReplyPerProbe bool
	// FlowsPerTarget fixed source ports per target, each sent
	// ProbesPerFlow tcp_syn probes in the window.
	FlowsPerTarget, ProbesPerFlow int
	// Overlay carries a pod's flows to another node's pods over a VXLAN
	// overlay (needs Pods): its trace shows its node, then the other
	// node from that node's tunnel address (which the node's agent
	// reports among its host addresses), then the pod. The underlay path
	// is the outer packet's, which the inner flow's hash picks, as Linux
	// does: the same spine for the flow, out of the trace's sight.
	Overlay bool
	// SilentRouters: no ToR or spine ever answers a trace, as in a cloud
	// VPC; hosts (a pod's node) and trace targets still do. Truth then
	// names what the matrix can know: the tier and a rack's uplinks, not
	// the spine or link.
	SilentRouters bool
	// SuperSpines, when set, makes the fabric three tiers (a Clos of
	// fabric pods): racks are grouped into fabric pods of RacksPerPod,
	// each with Spines aggregation switches that every ToR of the pod
	// connects to, and every aggregation switch connects to every
	// super-spine. A flow between fabric pods climbs its ToR, an
	// aggregation switch, a super-spine and the other pod's aggregation
	// switch, each picked by ECMP; the LB hangs off the super-spines.
	SuperSpines, RacksPerPod int
	// DNS adds the cluster DNS every agent asks (dns.go): a VIP and two
	// CoreDNS endpoints, over dns_udp and dns_tcp.
	DNS bool
	// SilentHop is the chance that an intermediate hop does not answer a
	// trace (ICMP rate limiting).
	SilentHop float64
	// Background is every link's loss ratio, each direction.
	Background float64
}

// AgentPort is the TCP port every target is probed on.
const AgentPort = 9809

// Kind is a fault class.
type Kind string

// The fault classes.
const (
	Healthy       Kind = "healthy"
	LinkLoss      Kind = "link"         // one direction of one ToR-spine (three tiers: ToR-aggregation) link
	SpineLoss     Kind = "spine"        // a spine (three tiers: an aggregation switch) drops on all its links
	SuperLoss     Kind = "super"        // three tiers: a super-spine drops on all its links
	SuperLinkLoss Kind = "superlink"    // three tiers: one direction of an aggregation-super-spine link
	ToRLoss       Kind = "tor"          // a ToR drops on all its links
	Blackhole     Kind = "blackhole"    // a spine drops every packet of 1 in 8 5-tuples
	LBLoss        Kind = "lb"           // the LB drops VIP packets
	LBEstablished Kind = "lb_blackhole" // the LB forgets established flows
	HostNIC       Kind = "host"         // one node's NIC drops both ways
	Dataplane     Kind = "dataplane"    // one node's pod forwarding (CNI, veths) drops both ways; needs Pods
	// MTUBlackhole is a link placed as LinkLoss's that drops every large
	// probe (LargeEvery) in silence and passes the small ones.
	MTUBlackhole Kind = "mtu"
	// SpineDelay is a spine (three tiers: an aggregation switch) that
	// delays every packet it forwards by Delay, dropping none; LinkDelay
	// one direction of a link placed as LinkLoss's.
	SpineDelay Kind = "spine_delay"
	LinkDelay  Kind = "link_delay"
)

// Fault is one injected fault.
type Fault struct {
	Kind Kind
	Loss float64
	// Where: Rack and Spine for a link (Up: ToR->spine), Spine, Rack,
	// Rack and Node for a host or a node's dataplane. In three tiers,
	// Spine is an aggregation switch of fabric pod Pod (a link's is the
	// Rack's pod), Super a super-spine; a super link is Pod, Spine and
	// Super (Up: aggregation->super-spine).
	Rack, Spine, Node int
	Pod, Super        int
	Up                bool
	// Delay is the seconds a delay kind adds (Random's loss argument).
	Delay float64
	// And are faults at the same time, of the loss kinds (link, spine,
	// tor, host, dataplane); Truth names ft's own place only.
	And []Fault
}

// Fabric is a simulated leaf-spine fabric.
type Fabric struct {
	cfg       Config
	nodeName  []string
	nodeAddr  []string
	podName   []string // by node, with Pods
	podAddr   []string
	podGW     []string   // the address a pod's node answers its traces from
	tunnel    []string   // a node's overlay address, with Overlay
	torAddr   []string   // host-facing
	torUp     [][]string // [rack][spine] ToR's address facing the spine
	spineDown [][]string // [spine][rack] spine's address facing the ToR
	// Three tiers: [agg][super] an aggregation switch's address facing
	// the super-spine, [super][agg] the super-spine's facing it; agg is
	// pod*Spines+spine.
	aggUp, superDown [][]string
	vip              string
	backends         []string
	rackLabels       []map[string]string
	router           map[string]bool // ToR and spine addresses
}

// New builds the fabric.
func New(cfg Config) (*Fabric, error) {
	// Up to 126 racks a rack's pods and its spine links each fit an
	// octet; without pods and with at most 100 spines, up to 255 racks
	// (10,000 nodes in 250 racks of 40) take two link octets per spine.
	maxRacks := 126
	if !cfg.Pods && cfg.Spines <= 100 {
		maxRacks = 255
	}
	if cfg.Racks < 1 || cfg.Racks > maxRacks || cfg.NodesPerRack < 1 || cfg.NodesPerRack > 240 || cfg.Spines < 1 || cfg.Spines > 200 {
		return nil, fmt.Errorf("matrixsim: racks %d (1-%d; 1-126 with pods or more than 100 spines), nodesPerRack %d (1-240), spines %d (1-200) out of range",
			cfg.Racks, maxRacks, cfg.NodesPerRack, cfg.Spines)
	}
	if cfg.FlowsPerTarget < 1 || cfg.ProbesPerFlow < 1 {
		return nil, fmt.Errorf("matrixsim: flowsPerTarget %d and probesPerFlow %d must be positive", cfg.FlowsPerTarget, cfg.ProbesPerFlow)
	}
	if cfg.Flat && (cfg.Racks != 1 || cfg.LB) {
		return nil, fmt.Errorf("matrixsim: flat wants racks 1 (got %d) and no lb (got %v)", cfg.Racks, cfg.LB)
	}
	if cfg.Pods && cfg.NodesPerRack > 14 {
		return nil, fmt.Errorf("matrixsim: pods want nodesPerRack 14 or fewer (got %d): a node's pod CIDR is a /28", cfg.NodesPerRack)
	}
	if cfg.Overlay && !cfg.Pods {
		return nil, fmt.Errorf("matrixsim: overlay wants pods: it carries their flows")
	}
	if cfg.L2Racks && cfg.Flat {
		return nil, fmt.Errorf("matrixsim: l2Racks and flat: a flat fabric is one L2 segment already")
	}
	if cfg.SuperSpines != 0 && (cfg.SuperSpines < 1 || cfg.SuperSpines > 16 || cfg.RacksPerPod < 1 || cfg.Racks > 126 ||
		(cfg.Racks+cfg.RacksPerPod-1)/cfg.RacksPerPod*cfg.Spines > 126) {
		return nil, fmt.Errorf("matrixsim: three tiers want 1-16 superSpines (got %d), racksPerPod >= 1 (got %d), at most 126 racks (got %d) and 126 aggregation switches in all (got %d pods x %d)",
			cfg.SuperSpines, cfg.RacksPerPod, cfg.Racks, (cfg.Racks+max(cfg.RacksPerPod, 1)-1)/max(cfg.RacksPerPod, 1), cfg.Spines)
	}
	if _, err := netip.ParseAddr(cfg.ClusterIP); cfg.ClusterIP != "" && err != nil {
		return nil, fmt.Errorf("matrixsim: clusterIP: %w", err)
	}
	f := &Fabric{cfg: cfg, vip: "198.19.250.1"}
	for r := range cfg.Racks {
		f.torAddr = append(f.torAddr, fmt.Sprintf("198.18.%d.1", r+1))
		var labels map[string]string
		if !cfg.Flat && !cfg.NoRackLabels {
			labels = map[string]string{"rack": fmt.Sprintf("rack%d", r+1)}
		}
		f.rackLabels = append(f.rackLabels, labels)
		var up []string
		for s := range cfg.Spines {
			up = append(up, linkAddr(cfg.Racks, s, r, 2))
		}
		f.torUp = append(f.torUp, up)
		for i := range cfg.NodesPerRack {
			f.nodeName = append(f.nodeName, fmt.Sprintf("r%03d-n%02d", r+1, i+1))
			f.nodeAddr = append(f.nodeAddr, fmt.Sprintf("198.18.%d.%d", r+1, i+11))
			if cfg.Pods {
				f.podName = append(f.podName, fmt.Sprintf("r%03d-n%02d-pod", r+1, i+1))
				f.podAddr = append(f.podAddr, fmt.Sprintf("198.18.%d.%d", 128+r, 16*(i+1)+2))
				f.podGW = append(f.podGW, fmt.Sprintf("198.18.%d.%d", 128+r, 16*(i+1)+1))
				f.tunnel = append(f.tunnel, fmt.Sprintf("198.18.%d.%d", 128+r, 16*(i+1)))
			}
		}
	}
	for s := range cfg.Spines {
		var down []string
		for r := range cfg.Racks {
			down = append(down, linkAddr(cfg.Racks, s, r, 1))
		}
		f.spineDown = append(f.spineDown, down)
	}
	for r := 0; r < min(4, cfg.Racks); r++ {
		f.backends = append(f.backends, f.nodeName[r*cfg.NodesPerRack])
	}
	// 198.19.220+super.0/24 holds a super-spine's links, two addresses
	// per aggregation switch, as a spine's /24 holds its racks'.
	for ss := range cfg.SuperSpines {
		var down []string
		for g := range f.pods() * cfg.Spines {
			down = append(down, fmt.Sprintf("198.19.%d.%d", 220+ss, 2*g+1))
		}
		f.superDown = append(f.superDown, down)
	}
	for g := range f.pods() * cfg.Spines {
		var up []string
		for ss := range cfg.SuperSpines {
			up = append(up, fmt.Sprintf("198.19.%d.%d", 220+ss, 2*g+2))
		}
		f.aggUp = append(f.aggUp, up)
	}
	f.router = map[string]bool{}
	for r := range cfg.Racks {
		f.router[f.torAddr[r]] = true
		for s := range cfg.Spines {
			f.router[f.torUp[r][s]], f.router[f.spineDown[s][r]] = true, true
		}
	}
	for g, up := range f.aggUp {
		for ss, a := range up {
			f.router[a], f.router[f.superDown[ss][g]] = true, true
		}
	}
	return f, nil
}

// pods is the number of fabric pods: 1 in two tiers.
func (f *Fabric) pods() int {
	if f.cfg.SuperSpines == 0 {
		return 1
	}
	return (f.cfg.Racks + f.cfg.RacksPerPod - 1) / f.cfg.RacksPerPod
}

// podOf is rack r's fabric pod.
func (f *Fabric) podOf(r int) int {
	if f.cfg.SuperSpines == 0 {
		return 0
	}
	return r / f.cfg.RacksPerPod
}

// agg numbers spine s of rack r's fabric pod among all of them.
func (f *Fabric) agg(r, s int) int { return f.podOf(r)*f.cfg.Spines + s }

// linkAddr numbers the spine s side (end 1) or the rack r side (end 2)
// of their link, in a fabric of racks racks.
func linkAddr(racks, s, r, end int) string {
	if racks <= 126 {
		return fmt.Sprintf("198.19.%d.%d", s+1, 2*r+end)
	}
	return fmt.Sprintf("198.19.%d.%d", 1+2*s+r/127, 2*(r%127)+end)
}

// Nodes is the number of nodes.
func (f *Fabric) Nodes() int { return len(f.nodeName) }

// An endpoint is a node (0 to Nodes()-1) or, with Pods, the pod of node
// e-Nodes().
func (f *Fabric) nodeOf(e int) int {
	if e >= len(f.nodeName) {
		return e - len(f.nodeName)
	}
	return e
}

func (f *Fabric) isPod(e int) bool { return e >= len(f.nodeName) }

func (f *Fabric) addrOf(e int) string {
	if f.isPod(e) {
		return f.podAddr[f.nodeOf(e)]
	}
	return f.nodeAddr[e]
}

func (f *Fabric) nameOf(e int) string {
	if f.isPod(e) {
		return f.podName[f.nodeOf(e)]
	}
	return f.nodeName[e]
}

// Hops is the address-to-device table for matrix.Config.Hops; empty for
// a flat fabric, where no router answers.
func (f *Fabric) Hops() map[string]string {
	h := map[string]string{}
	if f.cfg.Flat {
		return h
	}
	for r := range f.cfg.Racks {
		h[f.torAddr[r]] = TorName(r)
		for s := range f.cfg.Spines {
			h[f.torUp[r][s]] = TorName(r)
			h[f.spineDown[s][r]] = f.upperName(f.podOf(r), s)
		}
	}
	for g, up := range f.aggUp {
		for ss, a := range up {
			h[a] = f.upperName(g/f.cfg.Spines, g%f.cfg.Spines)
			h[f.superDown[ss][g]] = SuperName(ss)
		}
	}
	if f.cfg.LB {
		h["198.19.250.0/24"] = "lb1"
	}
	return h
}

// TorName and SpineName name the switches; NodeName the nodes.
func TorName(r int) string { return fmt.Sprintf("tor%d", r+1) }

// RackName is what the matrix calls rack r: its label, else the ToR its
// nodes' first hop names.
func (f *Fabric) RackName(r int) string {
	if rk := f.rackLabels[r]["rack"]; rk != "" {
		return rk
	}
	return TorName(r)
}
func SpineName(s int) string { return fmt.Sprintf("spine%d", s+1) }

// AggName names aggregation switch s of fabric pod p (three tiers);
// SuperName super-spine s.
func AggName(p, s int) string { return fmt.Sprintf("agg%d-%d", p+1, s+1) }
func SuperName(s int) string  { return fmt.Sprintf("super%d", s+1) }

// upperName names the switch above the ToRs of fabric pod p numbered s:
// a spine, or in three tiers an aggregation switch.
func (f *Fabric) upperName(p, s int) string {
	if f.cfg.SuperSpines == 0 {
		return SpineName(s)
	}
	return AggName(p, s)
}
func (f *Fabric) NodeName(rack, node int) string {
	return f.nodeName[rack*f.cfg.NodesPerRack+node]
}

// ServiceName is the ClusterIP Service's target name.
const ServiceName = "default/kubernetes"

// Truth is the suspect kind and name a perfect localizer reports.
func (f *Fabric) Truth(ft Fault) (kind, name string) {
	if f.cfg.SilentRouters {
		switch ft.Kind {
		case LinkLoss:
			return "tier", "uplinks of " + f.RackName(ft.Rack)
		case SpineLoss, Blackhole, SuperLoss, SuperLinkLoss:
			if r, ok := f.onlyRack(ft); ok {
				return "tier", "uplinks of " + f.RackName(r)
			}
			return "tier", "spine"
		case ToRLoss:
			return "device", f.RackName(ft.Rack)
		case SpineDelay, LinkDelay:
			loss := map[Kind]Kind{SpineDelay: SpineLoss, LinkDelay: LinkLoss}[ft.Kind]
			_, name := f.Truth(Fault{Kind: loss, Rack: ft.Rack, Spine: ft.Spine, Pod: ft.Pod, Up: ft.Up})
			return "latency", name
		}
	}
	switch ft.Kind {
	case MTUBlackhole:
		_, name := f.Truth(Fault{Kind: LinkLoss, Rack: ft.Rack, Spine: ft.Spine, Pod: ft.Pod, Up: ft.Up})
		return "pmtu", name
	case SpineDelay:
		return "latency", f.upperName(ft.Pod, ft.Spine)
	case LinkDelay:
		_, name := f.Truth(Fault{Kind: LinkLoss, Rack: ft.Rack, Spine: ft.Spine, Pod: ft.Pod, Up: ft.Up})
		return "latency", name
	case LinkLoss:
		up := f.upperName(f.podOf(ft.Rack), ft.Spine)
		if ft.Up {
			return "link", TorName(ft.Rack) + "->" + up
		}
		return "link", up + "->" + TorName(ft.Rack)
	case SpineLoss, Blackhole:
		return "device", f.upperName(ft.Pod, ft.Spine)
	case SuperLoss:
		return "device", SuperName(ft.Super)
	case SuperLinkLoss:
		if ft.Up {
			return "link", AggName(ft.Pod, ft.Spine) + "->" + SuperName(ft.Super)
		}
		return "link", SuperName(ft.Super) + "->" + AggName(ft.Pod, ft.Spine)
	case ToRLoss:
		return "device", TorName(ft.Rack)
	case LBLoss, LBEstablished:
		return "lb", "lb1"
	case HostNIC:
		return "host", f.NodeName(ft.Rack, ft.Node)
	case Dataplane:
		return "dataplane", f.NodeName(ft.Rack, ft.Node)
	case DNSEndpointLoss:
		return "host", DNSEndpointName(ft.Node % dnsEndpoints)
	case DNSNoEndpoints:
		return "lb", DNSServiceName
	}
	return "", ""
}

// onlyRack reports the rack every losing rack pair of a fault in three
// tiers involves, if one does. A silent fabric shows only which pairs
// lose, so then the most specific true statement is that rack's way up:
// an aggregation switch of a fabric pod of one rack, or, with two pods
// one of which is a single rack, any super-spine or its links, carries
// only that rack's flows to the others.
func (f *Fabric) onlyRack(ft Fault) (int, bool) {
	if f.cfg.SuperSpines == 0 {
		return 0, false
	}
	loses := func(a, b int) bool {
		pa, pb := f.podOf(a), f.podOf(b)
		switch ft.Kind {
		case SuperLoss:
			return pa != pb
		case SuperLinkLoss:
			return pa != pb && (pa == ft.Pod || pb == ft.Pod)
		}
		return pa == ft.Pod || pb == ft.Pod // an aggregation switch
	}
	inAll := make([]bool, f.cfg.Racks) // in every losing pair so far
	for r := range inAll {
		inAll[r] = true
	}
	anyPair := false
	for a := range f.cfg.Racks {
		for b := a + 1; b < f.cfg.Racks; b++ {
			if loses(a, b) {
				anyPair = true
				for r := range inAll {
					inAll[r] = inAll[r] && (r == a || r == b)
				}
			}
		}
	}
	only, n := 0, 0
	for r, in := range inAll {
		if in {
			only, n = r, n+1
		}
	}
	return only, anyPair && n == 1
}

// Random picks a fault of kind k at a random place.
func (f *Fabric) Random(k Kind, loss float64, rng *rand.Rand) Fault {
	ft := Fault{Kind: k, Loss: loss, Rack: rng.IntN(f.cfg.Racks), Spine: rng.IntN(f.cfg.Spines),
		Node: rng.IntN(f.cfg.NodesPerRack), Up: rng.IntN(2) == 0}
	if f.cfg.SuperSpines > 0 { // drawn after the others: two tiers draw as before
		ft.Pod, ft.Super = rng.IntN(f.pods()), rng.IntN(f.cfg.SuperSpines)
	}
	if k == SpineDelay || k == LinkDelay {
		ft.Delay, ft.Loss = loss, 0
	}
	return ft
}

// element numbering for loss lookups: one loss per directed link and per
// device.
type path struct {
	tors   [2]int // source and destination rack (-1: the LB)
	spine  int    // -1: same rack
	src    int    // node index
	dst    int    // node index, -1: the VIP
	toLB   bool
	fromLB bool
}

// Target numbers besides nodes'.
const (
	lbDst  = -1 // the LB's VIP
	svcDst = -2 // the ClusterIP Service
)

// apiServer is the node the ClusterIP's endpoint runs on.
const apiServer = 0

// hash mixes a 5-tuple with a per-switch seed (L4 ECMP).
func hash(a, b, sport, dport, seed uint64) uint64 {
	x := a*0x9E3779B97F4A7C15 ^ b*0xC2B2AE3D27D4EB4F ^ sport<<32 ^ dport ^ seed*0x165667B19E3779F9
	x ^= x >> 33
	x *= 0xFF51AFD7ED558CCD
	x ^= x >> 33
	x *= 0xC4CEB9FE1A85EC53
	x ^= x >> 33
	return x
}

const (
	dport    = 9808
	lbAddrID = 1 << 20
)

// Observations simulates one window under fault ft with a seeded random
// source: every node's report.
func (f *Fabric) Observations(ft Fault, seed uint64) []api.Observations {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	cfg := f.cfg
	n := len(f.nodeName)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]api.Observations, 0, n)
	faulty := f.faultIndex(ft)
	for src := range n {
		ra, ia := src/cfg.NodesPerRack, src%cfg.NodesPerRack
		obs := api.Observations{
			SchemaVersion: api.SchemaVersion,
			Agent: api.Agent{Name: f.nodeName[src], Class: "node", Address: f.nodeAddr[src], Labels: f.rackLabels[ra],
				FirstHop: f.firstHop(src)},
			Time: now, WindowSeconds: 60,
		}
		// A node agent reports its host's other addresses: the CNI's
		// gateway its pods' traces hear it from, its tunnel endpoint.
		if cfg.Pods {
			obs.Agent.HostAddresses = []string{f.podGW[src]}
		}
		if cfg.Overlay {
			obs.Agent.HostAddresses = append(obs.Agent.HostAddresses, f.tunnel[src])
		}
		var targets []int
		for i := range cfg.NodesPerRack {
			if i != ia {
				targets = append(targets, ra*cfg.NodesPerRack+i)
			}
		}
		for r := range cfg.Racks {
			if r != ra {
				targets = append(targets, r*cfg.NodesPerRack+ia)
			}
		}
		if cfg.LB {
			targets = append(targets, lbDst)
		}
		if cfg.ClusterIP != "" {
			targets = append(targets, svcDst)
		}
		targets = append(targets, f.dnsTargets(ft)...)
		obs.Targets = make([]api.Target, 0, len(targets))
		for _, dst := range targets {
			obs.Targets = append(obs.Targets, f.target(src, dst, ft, faulty, rng))
		}
		out = append(out, obs)
	}
	if cfg.Pods {
		for node := range n {
			out = append(out, f.podObservations(node, ft, faulty, rng, now))
		}
	}
	return out
}

// firstHop is the first hop node's agent reports: its ToR's host-facing
// address, nothing on a flat fabric (every peer is on-link).
func (f *Fabric) firstHop(node int) string {
	if f.cfg.Flat {
		return ""
	}
	return f.torAddr[node/f.cfg.NodesPerRack]
}

// podObservations is the report of node's pod.
func (f *Fabric) podObservations(node int, ft Fault, faulty faults, rng *rand.Rand, now time.Time) api.Observations {
	cfg := f.cfg
	n := len(f.nodeName)
	ra, ia := node/cfg.NodesPerRack, node%cfg.NodesPerRack
	labels := map[string]string{"node": f.nodeName[node]}
	for k, v := range f.rackLabels[ra] {
		labels[k] = v
	}
	obs := api.Observations{
		SchemaVersion: api.SchemaVersion,
		Agent: api.Agent{Name: f.podName[node], Class: "pod", Address: f.podAddr[node], Labels: labels,
			FirstHop: f.podGW[node]},
		Time: now, WindowSeconds: 60,
	}
	targets := []int{node}
	var pods []int
	for i := range cfg.NodesPerRack {
		if i != ia {
			targets = append(targets, ra*cfg.NodesPerRack+i)
			pods = append(pods, n+ra*cfg.NodesPerRack+i)
		}
	}
	for r := range cfg.Racks {
		if r != ra {
			targets = append(targets, r*cfg.NodesPerRack+ia)
			pods = append(pods, n+r*cfg.NodesPerRack+ia)
		}
	}
	targets = append(targets, pods...)
	if cfg.ClusterIP != "" {
		targets = append(targets, svcDst)
	}
	targets = append(targets, f.dnsTargets(ft)...)
	for _, dst := range targets {
		obs.Targets = append(obs.Targets, f.target(n+node, dst, ft, faulty, rng))
	}
	return obs
}

// faults is the loss each element adds, by kind.
type faults struct {
	// big, when set, is what large probes meet instead: an
	// MTUBlackhole's link, dropping all.
	big *faults
	// slow, when set, is where packets are delayed by delay seconds: a
	// delay kind's element, "dropping" all in this index.
	slow      *faults
	delay     float64
	link      map[[2]int]float64 // (rack, spine, up) encoded; see linkKey
	spine     map[int]float64    // by agg (in two tiers the spine)
	super     map[int]float64
	superLink map[[2]int]float64 // (agg, super, up) encoded as link's
	tor       map[int]float64
	host      map[int]float64
	pods      map[int]float64 // by node: its pods' forwarding
	lb        float64
	holeSpine int // an agg (in two tiers a spine), or -1
	// dnsEndpoint is the share of UDP lookups each CoreDNS endpoint
	// drops.
	dnsEndpoint [dnsEndpoints]float64
}

func linkKey(rack, spine int, up bool) [2]int {
	if up {
		return [2]int{rack, spine}
	}
	return [2]int{-1 - rack, spine}
}

func (f *Fabric) faultIndex(ft Fault) faults {
	x := faults{link: map[[2]int]float64{}, spine: map[int]float64{}, super: map[int]float64{}, superLink: map[[2]int]float64{},
		tor: map[int]float64{}, host: map[int]float64{}, pods: map[int]float64{}, holeSpine: -1}
	g := ft.Pod*f.cfg.Spines + ft.Spine
	switch ft.Kind {
	case LinkLoss:
		x.link[linkKey(ft.Rack, ft.Spine, ft.Up)] = ft.Loss
	case SpineLoss:
		x.spine[g] = ft.Loss
	case SuperLoss:
		x.super[ft.Super] = ft.Loss
	case SuperLinkLoss:
		x.superLink[linkKey(g, ft.Super, ft.Up)] = ft.Loss
	case ToRLoss:
		x.tor[ft.Rack] = ft.Loss
	case HostNIC:
		x.host[ft.Rack*f.cfg.NodesPerRack+ft.Node] = ft.Loss
	case Dataplane:
		x.pods[ft.Rack*f.cfg.NodesPerRack+ft.Node] = ft.Loss
	case LBLoss:
		x.lb = ft.Loss
	case Blackhole:
		x.holeSpine = g
	case DNSEndpointLoss:
		x.dnsEndpoint[ft.Node%dnsEndpoints] = ft.Loss
	case MTUBlackhole:
		big := f.faultIndex(Fault{Kind: LinkLoss, Loss: 1, Rack: ft.Rack, Spine: ft.Spine, Pod: ft.Pod, Up: ft.Up})
		x.big = &big
	case SpineDelay, LinkDelay:
		k := SpineLoss
		if ft.Kind == LinkDelay {
			k = LinkLoss
		}
		slow := f.faultIndex(Fault{Kind: k, Loss: 1, Rack: ft.Rack, Spine: ft.Spine, Pod: ft.Pod, Up: ft.Up})
		x.slow, x.delay = &slow, ft.Delay
	}
	for _, o := range ft.And {
		y := f.faultIndex(o)
		for _, m := range [][2]map[int]float64{{x.spine, y.spine}, {x.super, y.super}, {x.tor, y.tor}, {x.host, y.host}, {x.pods, y.pods}} {
			maps.Copy(m[0], m[1])
		}
		maps.Copy(x.link, y.link)
		maps.Copy(x.superLink, y.superLink)
	}
	return x
}

// way is where ECMP sends a packet out of a rack: up to spine (in three
// tiers an aggregation switch of the source's pod), and between fabric
// pods on to super-spine super and down the target pod's aggregation
// switch down; super is -1 and down is up otherwise.
type way struct{ up, super, down int }

// wayOf draws the way of the 5-tuple hashed to h from rack ra (-1: the
// LB) to rack rb (-1: the LB): each switch hashes it with a seed of its
// own. Two tiers draw the spine as before super-spines were simulated.
func (f *Fabric) wayOf(a, b, sport, dp, seed uint64, ra, rb int) way {
	cfg := f.cfg
	up := int(hash(a, b, sport, dp, seed) % uint64(cfg.Spines))
	w := way{up: up, super: -1, down: up}
	if cfg.SuperSpines == 0 || ra >= 0 && rb >= 0 && f.podOf(ra) == f.podOf(rb) {
		return w
	}
	if ra < 0 { // from the LB: a super-spine, then the target pod's agg
		w.up = -1
		w.super = int(hash(a, b, sport, dp, seed+1) % uint64(cfg.SuperSpines))
		w.down = int(hash(a, b, sport, dp, 3000+uint64(w.super)) % uint64(cfg.Spines))
		return w
	}
	w.super = int(hash(a, b, sport, dp, 1000+uint64(f.agg(ra, up))) % uint64(cfg.SuperSpines))
	if rb >= 0 {
		w.down = int(hash(a, b, sport, dp, 2000+uint64(w.super)) % uint64(cfg.Spines))
	}
	return w
}

// oneWay is the success probability of a packet from node a to node b
// (lbDst for the VIP) along way w (ignored in-rack), and whether a
// black hole eats it at hop index hole (-1: none).
func (f *Fabric) oneWay(a, b int, w way, x *faults, tuple uint64) (ok float64, hole int) {
	if !f.isPod(a) && (b < 0 || !f.isPod(b)) {
		return f.nodeWay(a, b, w, x, tuple)
	}
	// A pod's veth, and its node's forwarding: background, and what a
	// dataplane fault drops.
	veth := 1.0
	na, nb := f.nodeOf(a), b
	if f.isPod(a) {
		veth *= (1 - f.cfg.Background) * (1 - x.pods[na])
	}
	if b >= 0 && f.isPod(b) {
		nb = f.nodeOf(b)
		veth *= (1 - f.cfg.Background) * (1 - x.pods[nb])
	}
	if na == nb {
		return veth, -1 // a pod and its own node
	}
	ok, hole = f.nodeWay(na, nb, w, x, tuple)
	return ok * veth, hole
}

// nodeWay is oneWay between nodes (b, or the VIP).
func (f *Fabric) nodeWay(a, b int, w way, x *faults, tuple uint64) (ok float64, hole int) {
	cfg := f.cfg
	bg := 1 - cfg.Background
	ok = 1
	ra := a / cfg.NodesPerRack
	ok *= bg * (1 - x.host[a]) // a's NIC, a->ToR
	ok *= 1 - x.tor[ra]
	hole = -1
	rb := -1
	if b != lbDst {
		rb = b / cfg.NodesPerRack
		if ra == rb {
			return ok * (bg * (1 - x.host[b])), -1 // ToR->b, b's NIC
		}
	}
	g := f.agg(ra, w.up)
	ok *= bg * (1 - x.link[linkKey(ra, w.up, true)]) * (1 - x.spine[g])
	if g == x.holeSpine && tuple%8 == 0 {
		hole = 1
	}
	if w.super >= 0 {
		ok *= bg * (1 - x.superLink[linkKey(g, w.super, true)]) * (1 - x.super[w.super])
	}
	if b == lbDst {
		return ok * (bg * (1 - x.lb)), hole // the upper switch->LB, LB
	}
	if w.super >= 0 {
		gb := f.agg(rb, w.down)
		ok *= bg * (1 - x.superLink[linkKey(gb, w.super, false)]) * (1 - x.spine[gb])
		if gb == x.holeSpine && tuple%8 == 0 && hole < 0 {
			hole = 3
		}
	}
	ok *= bg * (1 - x.link[linkKey(rb, w.down, false)]) * (1 - x.tor[rb])
	return ok * (bg * (1 - x.host[b])), hole // ToR->b, b's NIC
}

func (f *Fabric) target(src, dst int, ft Fault, x faults, rng *rand.Rand) api.Target {
	if isDNSDst(dst) {
		return f.dnsTarget(src, dst, ft, x, rng)
	}
	cfg := f.cfg
	ra := f.nodeOf(src) / cfg.NodesPerRack
	t := api.Target{Port: AgentPort, Protocols: []api.Protocol{{Protocol: "tcp_syn"}}}
	from := "node"
	if f.isPod(src) {
		from = "pod"
	}
	// peer is the endpoint the probes reach: the Service's are DNATed
	// on the source's node to the API server's.
	peer := dst
	switch {
	case dst == lbDst:
		t.Name, t.Address, t.Class, t.Path = "vip-web", f.vip, "lb", from+"_to_lb"
		if !cfg.LBNoBackends {
			t.Backends = f.backends
		}
	case dst == svcDst:
		t.Name, t.Address, t.Class, t.Path = ServiceName, cfg.ClusterIP, "lb", from+"_to_lb"
		peer = apiServer
	case f.isPod(dst):
		t.Name, t.Address, t.Class, t.Path = f.nameOf(dst), f.addrOf(dst), "pod", from+"_to_pod"
		t.Labels = map[string]string{"node": f.nodeName[f.nodeOf(dst)]}
		for k, v := range f.rackLabels[f.nodeOf(dst)/cfg.NodesPerRack] {
			t.Labels[k] = v
		}
	default:
		t.Name, t.Address, t.Class, t.Path = f.nodeName[dst], f.nodeAddr[dst], "node", from+"_to_node"
		t.Labels = f.rackLabels[dst/cfg.NodesPerRack]
	}
	tcp := &t.Protocols[0]
	tcp.Flows = make([]api.Flow, 0, cfg.FlowsPerTarget)
	dstID := uint64(lbAddrID)
	if peer >= 0 {
		dstID = uint64(peer)
	}
	large := api.Protocol{Protocol: api.ProtocolTCPSYNMTU}
	for fl := range cfg.FlowsPerTarget {
		sport := uint64(33434 + fl*7)
		rb := -1
		if peer >= 0 {
			rb = f.nodeOf(peer) / cfg.NodesPerRack
		}
		w := f.wayOf(uint64(src), dstID, sport, dport, uint64(ra), ra, rb)
		// The API server's own node DNATs the Service to itself:
		// nothing leaves it.
		local := dst == svcDst && f.nodeOf(src) == peer
		pOK, fwdOK, fwdHole := 1.0, 1.0, -1
		if !local {
			fwdOK, fwdHole = f.oneWay(src, peer, w, &x, hash(uint64(src), dstID, sport, dport, 999))
			pOK = f.roundTrip(fwdOK, fwdHole, src, peer, sport, dstID, 0, &x)
		}
		if cfg.LargeEvery > 0 {
			f.largeProbes(&large, src, peer, w, x, local, pOK, sport, dport, dstID, rng)
		}
		var lost uint64
		for range cfg.ProbesPerFlow {
			if !local && cfg.ReplyPerProbe {
				pOK = f.roundTrip(fwdOK, fwdHole, src, peer, sport, dstID, rng.Uint64()|1, &x)
			}
			if rng.Float64() >= pOK {
				lost++
			}
		}
		sent := uint64(cfg.ProbesPerFlow)
		hops := []string{cfg.ClusterIP}
		if !local {
			hops = f.hops(src, peer, w, fwdHole, rng)
			if dst == svcDst && hops[len(hops)-1] != "" {
				hops[len(hops)-1] = cfg.ClusterIP // un-NATed by the source node
			}
		}
		fp := &api.FlowPath{Hops: hops, SuspectHop: -1}
		if fwdHole >= 0 {
			fp.SuspectHop = fwdHole
		}
		if cfg.Untraced {
			fp = nil
		}
		st := api.Stats{Sent: sent, Lost: lost, LossRatio: float64(lost) / float64(sent)}
		if lost < sent {
			st.RTTP50 = f.rtt(src, peer, w, &x, local, sport, dstID, len(hops))
			st.RTTP99 = st.RTTP50
		}
		tcp.Flows = append(tcp.Flows, api.Flow{SourcePort: uint16(sport), Stats: st, Path: fp})
		tcp.Sent += sent
		tcp.Lost += lost
	}
	tcp.LossRatio = float64(tcp.Lost) / float64(tcp.Sent)
	if len(large.Flows) > 0 {
		t.Protocols = append(t.Protocols, large)
	}
	if dst == lbDst {
		h2 := api.Protocol{Protocol: "http2_ping", Stats: api.Stats{Sent: uint64(cfg.ProbesPerFlow)}}
		if ft.Kind == LBEstablished {
			t.EstablishedFlowBlackhole = true
			h2.Lost, h2.LossRatio = h2.Sent, 1
		}
		t.Protocols = append(t.Protocols, h2)
	}
	return t
}

// rtt is a flow's median round trip: 100 µs, 20 a hop, up to 50 more
// from the 5-tuple (a hash, not the random source, so that the loss of
// every row draws as before), and a delay kind's delay each way the
// flow or its reply crosses its element.
func (f *Fabric) rtt(src, peer int, w way, x *faults, local bool, sport, dstID uint64, hops int) float64 {
	rtt := 100e-6 + 20e-6*float64(hops) + 50e-6*float64(hash(uint64(src), dstID, sport, dport, 4242)%1000)/1000
	if x.slow == nil || local {
		return rtt
	}
	if ok, _ := f.oneWay(src, peer, w, x.slow, hash(uint64(src), dstID, sport, dport, 999)); ok == 0 {
		rtt += x.delay
	}
	if ok, _ := f.reverse(src, peer, sport, dstID, 0, x.slow); ok == 0 {
		rtt += x.delay
	}
	return rtt
}

// largeProbes adds flow sport's large probes (Config.LargeEvery) to
// big, the target's tcp_syn_mtu: all lost if the way out crosses an MTU
// black hole, else each as a small probe (pOK); a large probe's reply is
// a small SYN-ACK.
func (f *Fabric) largeProbes(big *api.Protocol, src, peer int, w way, x faults, local bool, pOK float64, sport, dport, dstID uint64, rng *rand.Rand) {
	sent := uint64(max(1, f.cfg.ProbesPerFlow/f.cfg.LargeEvery))
	var lost uint64
	if x.big != nil && !local {
		if ok, _ := f.oneWay(src, peer, w, x.big, hash(uint64(src), dstID, sport, dport, 999)); ok == 0 {
			lost = sent
		}
	}
	if lost == 0 {
		for range sent {
			if rng.Float64() >= pOK {
				lost++
			}
		}
	}
	big.Flows = append(big.Flows, api.Flow{SourcePort: uint16(sport), Stats: api.Stats{Sent: sent, Lost: lost}})
	big.Sent += sent
	big.Lost += lost
}

// roundTrip is the success probability of a probe whose forward way
// passes with fwdOK (or falls in black hole fwdHole >= 0) and of its
// reply (reverse, with label).
func (f *Fabric) roundTrip(fwdOK float64, fwdHole, src, peer int, sport, dstID, label uint64, x *faults) float64 {
	revOK, revHole := f.reverse(src, peer, sport, dstID, label, x)
	if fwdHole >= 0 || revHole >= 0 {
		return 0
	}
	return fwdOK * revOK
}

// reverse is the success probability of the reply from peer (lbDst for
// the VIP) to src, on the spine its own 5-tuple and label hash to (label
// 0: the flow's own), and whether a black hole eats it (hole >= 0).
func (f *Fabric) reverse(src, peer int, sport, dstID, label uint64, x *faults) (ok float64, hole int) {
	cfg := f.cfg
	ra := f.nodeOf(src) / cfg.NodesPerRack
	if peer != lbDst {
		rp := f.nodeOf(peer) / cfg.NodesPerRack
		w := f.wayOf(dstID, uint64(src), dport, sport^label, uint64(rp), rp, ra)
		return f.oneWay(peer, src, w, x, hash(dstID, uint64(src), dport, sport, 999))
	}
	w := f.wayOf(dstID, uint64(src), dport, sport^label, 7777, -1, ra)
	g := f.agg(ra, w.down)
	bg := 1 - cfg.Background
	lb := bg * (1 - x.lb)
	if w.super >= 0 {
		lb *= bg * (1 - x.super[w.super]) * (1 - x.superLink[linkKey(g, w.super, false)])
	}
	ok = lb * bg * (1 - x.spine[g]) * (1 - x.link[linkKey(ra, w.down, false)]) *
		(1 - x.tor[ra]) * bg * (1 - x.host[f.nodeOf(src)])
	if f.isPod(src) {
		ok *= 1 - x.pods[f.nodeOf(src)]
	}
	hole = -1
	if g == x.holeSpine && hash(dstID, uint64(src), dport, sport, 999)%8 == 0 {
		hole = 1
	}
	return ok, hole
}

// hops is what a Paris traceroute of the flow sees: each router answers
// from the interface facing the sender; the destination is the last hop.
func (f *Fabric) hops(src, dst int, w way, hole int, rng *rand.Rand) []string {
	cfg := f.cfg
	na := f.nodeOf(src)
	var h []string
	switch {
	case f.isPod(src) && dst == na:
		// A pod's trace to its own node: the node answers first.
		h = []string{f.nodeAddr[na]}
	case f.isPod(src) && cfg.Overlay && f.isPod(dst) && f.nodeOf(dst) != na:
		h = []string{f.podGW[na], f.tunnel[f.nodeOf(dst)], f.addrOf(dst)}
		if hole >= 0 {
			hole = 0 // past the node, in the underlay: the rest is silent
		}
	case f.isPod(src):
		h = append(f.nodePath(na, dst, w, []string{f.podGW[na]}), f.addrOf(dst))
		if hole >= 0 {
			hole++
		}
	case dst == lbDst:
		h = append(f.nodePath(na, dst, w, nil), f.vip)
	default:
		h = append(f.nodePath(na, dst, w, nil), f.addrOf(dst))
	}
	for i := range len(h) - 1 {
		if cfg.SilentRouters && f.router[h[i]] || rng.Float64() < cfg.SilentHop {
			h[i] = ""
		}
	}
	if hole >= 0 {
		for i := hole + 1; i < len(h); i++ {
			h[i] = ""
		}
	}
	return h
}

// nodePath appends to h the hops from node na to endpoint dst, less
// dst itself.
func (f *Fabric) nodePath(na, dst int, w way, h []string) []string {
	cfg := f.cfg
	if dst == lbDst {
		return f.upper(append(h, f.torAddr[na/cfg.NodesPerRack]), na/cfg.NodesPerRack, -1, w)
	}
	nb := f.nodeOf(dst)
	ra, rb := na/cfg.NodesPerRack, nb/cfg.NodesPerRack
	switch {
	case cfg.Flat || nb == na:
	case rb == ra && !f.isPod(dst):
		if !cfg.L2Racks {
			h = append(h, f.torAddr[ra])
		}
	case rb == ra: // a rack-mate's pod: the ToR routes pod CIDRs
		h = append(h, f.torAddr[ra], f.nodeAddr[nb])
	default:
		h = f.upper(append(h, f.torAddr[ra]), ra, rb, w)
		if f.isPod(dst) {
			h = append(h, f.nodeAddr[nb])
		}
	}
	return h
}

// upper appends to h the hops above the ToRs from rack ra to rack rb
// (-1: the LB) along w, each answering from its interface facing the
// sender: the spine or aggregation switch, then between fabric pods the
// super-spine and the other pod's aggregation switch, then rb's ToR.
func (f *Fabric) upper(h []string, ra, rb int, w way) []string {
	h = append(h, f.spineDown[w.up][ra])
	if w.super >= 0 {
		h = append(h, f.superDown[w.super][f.agg(ra, w.up)])
	}
	if rb < 0 {
		return h
	}
	if w.super >= 0 {
		h = append(h, f.aggUp[f.agg(rb, w.down)][w.super])
	}
	return append(h, f.torUp[rb][w.down])
}
