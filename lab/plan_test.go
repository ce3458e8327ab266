package lab

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestSpecValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec Spec
		want []string // substrings of the error; none: valid
	}{
		{"defaults", DefaultSpec(), nil},
		{"largest", Spec{Prefix: "abcdefghijkl", Spines: 8, Racks: 9, NodesPerRack: 9, PodsPerNode: 9, Zones: 9, LB: true}, nil},
		{"all wrong at once", Spec{Prefix: "Bad-Prefix", Spines: 9, Racks: 10, NodesPerRack: -1, PodsPerNode: 10, Zones: 11, LBPorts: []uint16{0}},
			[]string{"prefix:", "spines: 9 not in 1..8", "racks: 10 not in 1..9", "nodes_per_rack: -1", "pods_per_node: 10", "zones: 11", "lb_ports[0]: port 0", "lb_ports: set but lb is off"}},
		{"dash in prefix", Spec{Prefix: "a-b", Spines: 1, Racks: 1, NodesPerRack: 1, Zones: 1}, []string{`prefix: "a-b"`}},
		{"cluster", Spec{Prefix: "c", Spines: 2, Racks: 2, NodesPerRack: 2, PodsPerNode: -1, Zones: 1, LB: true, ControlPlane: true, PodCIDRs: true}, nil},
		{"cluster on an overlay", Spec{Prefix: "c", Spines: 2, Racks: 2, NodesPerRack: 2, PodsPerNode: -1, Zones: 1, LB: true, ControlPlane: true, PodCIDRs: true, Overlay: true}, nil},
		{"overlay without pods", Spec{Prefix: "c", Spines: 1, Racks: 1, NodesPerRack: 1, PodsPerNode: -1, Zones: 1, Overlay: true}, []string{"overlay: needs pods"}},
		{"pod cidrs with lab pods", Spec{Prefix: "c", Spines: 1, Racks: 1, NodesPerRack: 1, PodsPerNode: 1, Zones: 1, PodCIDRs: true}, []string{"pod_cidrs: only without lab pods"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestPlanAddressesAndNames(t *testing.T) {
	t.Parallel()
	spec := Spec{Prefix: "abcdefghijkl", Spines: 8, Racks: 9, NodesPerRack: 9, PodsPerNode: 9, LB: true, ControlPlane: true}
	spec.SetDefaults()
	p := newPlan(spec)
	seen := map[netip.Addr]string{}
	own := func(a netip.Addr, who string) {
		if !LabRange.Contains(a) {
			t.Errorf("%s: %v outside %v", who, a, LabRange)
		}
		if other, dup := seen[a]; dup {
			t.Errorf("%v assigned to %s and %s", a, other, who)
		}
		seen[a] = who
	}
	for _, l := range p.links {
		for _, e := range []linkEnd{l.a, l.b} {
			if len(e.dev) > 15 {
				t.Errorf("interface %q in %s longer than IFNAMSIZ-1", e.dev, e.ns)
			}
			for _, a := range e.addrs {
				own(a.Addr(), e.ns+"/"+e.dev)
			}
		}
	}
	for _, a := range p.addrs {
		own(a.addr.Addr(), a.ns+"/"+a.dev)
	}
	for _, r := range p.routes {
		if !LabRange.Contains(r.dst.Addr()) {
			t.Errorf("route in %s to %v outside the lab range", r.ns, r.dst)
		}
	}
	if got, want := len(p.ns), 8+9+81+729+1+1; got != want {
		t.Errorf("namespaces: %d, want %d", got, want)
	}
	f := p.fabric
	for _, tc := range []struct{ host, addr, ns string }{
		{"n21", "198.19.2.11", "abcdefghijkl-n21"},
		{"n21p1", "198.19.102.17", "abcdefghijkl-n21p1"},
		{"n99p9", "198.19.109.153", "abcdefghijkl-n99p9"},
	} {
		h, ok := f.Host(tc.host)
		if !ok || h.Addr.String() != tc.addr || h.Namespace != tc.ns {
			t.Errorf("host %s = %+v, want addr %s namespace %s", tc.host, h, tc.addr, tc.ns)
		}
	}
}

func TestHopsAndZones(t *testing.T) {
	t.Parallel()
	spec := DefaultSpec()
	spec.Racks, spec.Zones = 4, 2
	f := newPlan(spec).fabric
	hops := f.Hops()
	for addr, want := range map[string]string{
		"198.18.1.0": "spine1", "198.18.1.1": "tor1", "198.18.3.7": "tor4", "198.18.3.254": "spine3",
		"198.18.3.255": "lb", "198.19.2.1": "tor2", "198.19.250.10": "lb", "198.19.250.11": "lb",
	} {
		if hops[addr] != want {
			t.Errorf("Hops()[%s] = %q, want %q", addr, hops[addr], want)
		}
	}
	if _, ok := hops["198.19.1.11"]; ok {
		t.Errorf("Hops() names a node address; hosts are not hops")
	}
	for host, zone := range map[string]string{"n11": "z1", "n21": "z1", "n31": "z2", "n43p1": "z2"} {
		if h, _ := f.Host(host); h.Zone != zone {
			t.Errorf("%s zone %q, want %q", host, h.Zone, zone)
		}
	}
}

func TestFaultCheck(t *testing.T) {
	t.Parallel()
	f := newPlan(DefaultSpec()).fabric
	noLB := DefaultSpec()
	noLB.LB = false
	dualSpec := DefaultSpec()
	dualSpec.IPv6 = true
	dual := newPlan(dualSpec).fabric
	for _, tc := range []struct {
		name string
		f    *Fabric
		ft   Fault
		want string // "" valid
	}{
		{"device loss", f, Fault{Kind: FaultDeviceLoss, Device: "spine2", Permille: 50}, ""},
		{"link loss", f, Fault{Kind: FaultLinkLoss, From: "tor1", To: "spine2", Permille: 20}, ""},
		{"link to lb", f, Fault{Kind: FaultLinkLoss, From: "spine1", To: "lb", Permille: 20, Both: true}, ""},
		{"blackhole", f, Fault{Kind: FaultBlackhole, Device: "spine1", Mod: 4}, ""},
		{"lb forget", f, Fault{Kind: FaultLBForget}, ""},
		{"host nic pod", f, Fault{Kind: FaultHostNIC, Host: "n21p1", Permille: 300}, ""},
		{"partition zone", f, Fault{Kind: FaultPartition, Zone: "z1"}, ""},
		{"port loss", f, Fault{Kind: FaultPortLoss, Host: "n21", Proto: "udp", Port: 53, Addr: "198.18.121.2", Permille: 200}, ""},
		{"port loss, every address", f, Fault{Kind: FaultPortLoss, Host: "n21", Proto: "tcp", Port: 53, Permille: 200}, ""},
		{"port loss, bad fields", f, Fault{Kind: FaultPortLoss, Host: "n21", Proto: "sctp", Port: 70000, Addr: "x", Permille: 200}, "proto: \"sctp\" not one of udp, tcp\nport: 70000 not in 1..65535\naddr: \"x\" is not an IP address"},
		{"port loss, address of another family", dual, Fault{Kind: FaultPortLoss, Host: "n21", Proto: "udp", Port: 53, Addr: "2001:2::1", Family: FamilyIPv4, Permille: 200}, "addr: 2001:2::1 is not ipv4"},
		{"port on another kind", f, Fault{Kind: FaultHostNIC, Host: "n21", Port: 53, Permille: 200}, "port: not used by host-nic"},
		{"no kind", f, Fault{}, "kind: missing"},
		{"host as device", f, Fault{Kind: FaultDeviceLoss, Device: "n11", Permille: 5}, `device: unknown device "n11" (one of spine1, spine2, spine3, tor1, tor2, tor3, lb)`},
		{"missing permille", f, Fault{Kind: FaultLBLoss}, "permille: 0 not in 1..1000"},
		{"link not adjacent", f, Fault{Kind: FaultLinkLoss, From: "spine1", To: "spine2", Permille: 5}, "spine1 has no link to spine2"},
		{"mtu black hole", f, Fault{Kind: FaultMTUBlackhole, From: "tor1", To: "spine2", MTU: 1200, Both: true}, ""},
		{"mtu", f, Fault{Kind: FaultMTU, From: "tor1", To: "spine2", MTU: 1200}, ""},
		{"mtu not below the links'", f, Fault{Kind: FaultMTU, From: "tor1", To: "spine2", MTU: 1500, Both: true}, "mtu: 1500 not in 68..1499 bytes: below the lab's links' 1500\nboth: not used by mtu"},
		{"mtu under IPv6's minimum", dual, Fault{Kind: FaultMTU, From: "tor1", To: "spine2", MTU: 1000}, "mtu: 1000 below IPv6's 1280 on a lab with IPv6"},
		{"mtu black hole, bad fields", f, Fault{Kind: FaultMTUBlackhole, From: "tor1", To: "tor2", MTU: 40, Permille: 5}, "host-nic)\nmtu: 40 not in 68..9000 bytes (IPv6 needs 1280 at least)\npermille: not used by mtu-blackhole"},
		{"unknown host", f, Fault{Kind: FaultHostNIC, Host: "n44", Permille: 5}, `host: unknown host "n44"`},
		{"unknown zone", f, Fault{Kind: FaultPartition, Zone: "z7"}, `zone: unknown zone "z7" (z1..z3)`},
		{"stray field", f, Fault{Kind: FaultBlackhole, Device: "spine1", Mod: 4, Permille: 3}, "permille: not used by blackhole"},
		{"no lb", newPlan(noLB).fabric, Fault{Kind: FaultLBForget}, "this lab has no LB"},
		{"ipv4 only", f, Fault{Kind: FaultDeviceLoss, Device: "spine2", Permille: 100, Family: FamilyIPv4}, ""},
		{"ipv6 without it", f, Fault{Kind: FaultDeviceLoss, Device: "spine2", Permille: 100, Family: FamilyIPv6}, "family: ipv6: this lab has no IPv6"},
		{"ipv6", dual, Fault{Kind: FaultDeviceLoss, Device: "spine2", Permille: 100, Family: FamilyIPv6}, ""},
		{"delay", f, Fault{Kind: FaultDelay, Device: "spine2", Millis: 20}, ""},
		{"delay ipv6 only", dual, Fault{Kind: FaultDelay, Device: "tor1", Millis: 1000, Family: FamilyIPv6}, ""},
		{"delay, bad fields", f, Fault{Kind: FaultDelay, Device: "n11", Millis: 1001, Permille: 5}, "device: unknown device \"n11\" (one of spine1, spine2, spine3, tor1, tor2, tor3, lb)\nmillis: 1001 not in 1..1000\npermille: not used by delay"},
		{"delay without millis", f, Fault{Kind: FaultDelay, Device: "spine1"}, "millis: 0 not in 1..1000"},
		{"millis on another kind", f, Fault{Kind: FaultDeviceLoss, Device: "spine1", Permille: 5, Millis: 20}, "millis: not used by device-loss"},
		{"unknown family", dual, Fault{Kind: FaultPartition, Rack: "r1", Family: "inet6"}, `family: "inet6" not one of ipv4, ipv6`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Check(tc.ft)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check(%v) = %v, want nil", tc.ft, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Check(%v) = %v, want error containing %q", tc.ft, err, tc.want)
			}
		})
	}
}

func TestFaultString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ft   Fault
		want string
	}{
		{Fault{Kind: FaultDeviceLoss, Device: "spine2", Permille: 100, Family: FamilyIPv6}, "device-loss device=spine2 permille=100 family=ipv6"},
		{Fault{Kind: FaultDelay, Device: "spine2", Millis: 20, Family: FamilyIPv4}, "delay device=spine2 millis=20 family=ipv4"},
	} {
		if got := tc.ft.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// TestClusterPlan: with a control plane and pod CIDRs, the fabric a real
// cluster runs on routes each node's pod CIDR to it, reaches the control
// plane from every rack and the LB, and the VIP fronts the API server.
func TestClusterPlan(t *testing.T) {
	t.Parallel()
	spec := Spec{Prefix: "c", Spines: 2, Racks: 2, NodesPerRack: 2, PodsPerNode: -1, LB: true, ControlPlane: true, PodCIDRs: true}
	spec.SetDefaults()
	p := newPlan(spec)
	f := p.fabric
	if cp := f.ControlPlane; cp == nil || cp.Addr.String() != "198.19.251.10" || cp.Namespace != "c-cp" {
		t.Fatalf("control plane %+v, want 198.19.251.10 in c-cp", cp)
	}
	if ns, err := f.Namespace("cp"); err != nil || ns != "c-cp" {
		t.Errorf(`Namespace("cp") = %q, %v`, ns, err)
	}
	if len(f.Backends) != 1 || f.Backends[0] != f.ControlPlane.Addr {
		t.Errorf("backends %v, want only the control plane", f.Backends)
	}
	if len(spec.LBPorts) != 1 || spec.LBPorts[0] != APIServerPort {
		t.Errorf("LB ports %v, want [%d]", spec.LBPorts, APIServerPort)
	}
	routes := map[string]bool{}
	for _, r := range p.routes {
		routes[r.ns+" "+r.dst.String()] = true
	}
	for _, want := range []string{
		"c-tor1 198.19.101.16/28", "c-tor1 198.19.101.32/28", "c-tor2 198.19.102.16/28",
		"c-spine1 198.19.251.0/24", "c-tor2 198.19.251.0/24", "c-lb 198.19.251.0/24",
		"c-cp 198.19.1.0/24", "c-cp 198.19.102.0/24", "c-cp 198.19.250.0/24",
	} {
		if !routes[want] {
			t.Errorf("no route %s", want)
		}
	}
	n21, _ := f.Host("n21")
	if n21.PodCIDR.String() != "198.19.102.16/28" || !PodRange.Contains(n21.PodCIDR.Addr()) {
		t.Errorf("n21 pod CIDR %v, want 198.19.102.16/28 inside %v", n21.PodCIDR, PodRange)
	}
	if _, ok := f.Hops()[f.ControlPlane.Addr.String()]; ok {
		t.Errorf("Hops() names the control plane; it is a host, not a hop")
	}
}

// TestPlanIPv6: with IPv6 every host, pod and router interface also has
// an address from 2001:2::/48, each used once, and the IPv4 plan beside
// it is the one a fabric without IPv6 has.
func TestPlanIPv6(t *testing.T) {
	t.Parallel()
	spec := Spec{Prefix: "abcdefghijkl", Spines: 8, Racks: 9, NodesPerRack: 9, PodsPerNode: 9, LB: true, ControlPlane: true, IPv6: true}
	spec.SetDefaults()
	p := newPlan(spec)
	seen := map[netip.Addr]string{} // address -> namespace
	own := func(a netip.Addr, ns, who string) {
		if a.Is6() && !LabRange6.Contains(a) {
			t.Errorf("%s: %v outside %v", who, a, LabRange6)
		}
		// A node holds its address on eth0 and on each pod veth.
		if other, dup := seen[a]; dup && other != ns {
			t.Errorf("%v assigned in %s and %s", a, other, who)
		}
		seen[a] = ns
	}
	for _, l := range p.links {
		for _, e := range []linkEnd{l.a, l.b} {
			for _, a := range e.addrs {
				own(a.Addr(), e.ns, e.ns+"/"+e.dev)
			}
		}
	}
	for _, a := range p.addrs {
		own(a.addr.Addr(), a.ns, a.ns+"/"+a.dev)
	}
	f := p.fabric
	for _, h := range append(f.Hosts, *f.ControlPlane) {
		if !LabRange6.Contains(h.Addr6) || seen[h.Addr6] != h.Namespace {
			t.Errorf("host %s: Addr6 %v not assigned in its namespace", h.Name, h.Addr6)
		}
		if h.Class == ClassNode && (!PodRange6.Contains(h.PodCIDR6.Addr()) || h.PodCIDR6.Bits() != 124) {
			t.Errorf("node %s: PodCIDR6 %v not a /124 in %v", h.Name, h.PodCIDR6, PodRange6)
		}
	}
	for _, r := range p.routes {
		for _, nh := range r.via {
			if nh.gw.IsValid() && nh.gw.Is6() != r.dst.Addr().Is6() {
				t.Errorf("route in %s to %v via %v: families differ", r.ns, r.dst, nh.gw)
			}
		}
		if !LabRange.Contains(r.dst.Addr()) && !LabRange6.Contains(r.dst.Addr()) {
			t.Errorf("route in %s to %v outside the lab ranges", r.ns, r.dst)
		}
	}
	for _, n := range []netip.Prefix{rackNodeNet6(9), lbNet6, cpNet6, upperLinks6(upper{tierSpine, 1, 0}), upperLinks6(upper{tierSpine, 8, 0}),
		upperLinks6(upper{tierAgg, 9, 8}), upperLinks6(upper{tierSuper, 8, 0})} {
		if n.Overlaps(PodRange6) {
			t.Errorf("%v overlaps the pod range %v", n, PodRange6)
		}
	}
}

// TestPlanIPv6Numbers: an IPv6 address reads as its IPv4 twin does.
func TestPlanIPv6Numbers(t *testing.T) {
	t.Parallel()
	spec := DefaultSpec()
	spec.ControlPlane, spec.IPv6 = true, true
	spec.SetDefaults()
	f := newPlan(spec).fabric
	for _, tc := range []struct{ host, addr6, podCIDR6 string }{
		{"n21", "2001:2:0:2::11", "2001:2:0:102::10/124"},
		{"n33", "2001:2:0:3::13", "2001:2:0:103::30/124"},
		{"n21p1", "2001:2:0:102::11", ""},
	} {
		h, _ := f.Host(tc.host)
		if h.Addr6.String() != tc.addr6 || (tc.podCIDR6 != "" && h.PodCIDR6.String() != tc.podCIDR6) {
			t.Errorf("%s: addr6 %v pod CIDR6 %v, want %s %s", tc.host, h.Addr6, h.PodCIDR6, tc.addr6, tc.podCIDR6)
		}
	}
	hops := f.Hops()
	for addr, want := range map[string]string{
		"2001:2:0:1201::": "spine2", "2001:2:0:1201::1": "tor1", "2001:2:0:1303::1": "tor3",
		"2001:2:0:13fe::": "spine3", "2001:2:0:13fe::1": "lb", "2001:2:0:3::1": "tor3",
		"2001:2:0:250::10": "lb", "2001:2:0:250::11": "lb",
		"198.18.2.0": "spine2", "198.19.250.10": "lb",
	} {
		if hops[addr] != want {
			t.Errorf("Hops()[%s] = %q, want %q", addr, hops[addr], want)
		}
	}
	if got := f.ControlPlane.Addr6.String(); got != "2001:2:0:251::10" {
		t.Errorf("control plane addr6 %s, want 2001:2:0:251::10", got)
	}
	if len(f.Backends6) != 1 || f.Backends6[0] != f.ControlPlane.Addr6 || f.VIP6.String() != "2001:2:0:250::10" {
		t.Errorf("VIP6 %v backends6 %v, want 2001:2:0:250::10 in front of the control plane", f.VIP6, f.Backends6)
	}
}

// TestPlanIPv6Additive: IPv6 adds to the IPv4 plan and changes nothing
// of it (TestPlanGolden pins the IPv4 plan itself).
func TestPlanIPv6Additive(t *testing.T) {
	t.Parallel()
	spec := DefaultSpec()
	v4 := newPlan(spec)
	spec.IPv6 = true
	dual := newPlan(spec)

	stripped := *dual.fabric
	stripped.Spec.IPv6, stripped.VIP6, stripped.LBSource6, stripped.Backends6 = false, netip.Addr{}, netip.Addr{}, nil
	stripped.Hosts = nil
	for _, h := range dual.fabric.Hosts {
		h.Addr6, h.PodCIDR6 = netip.Addr{}, netip.Prefix{}
		stripped.Hosts = append(stripped.Hosts, h)
	}
	stripped.Routers = nil
	for _, r := range dual.fabric.Routers {
		ifs := r.Interfaces
		r.Interfaces = nil
		for _, i := range ifs {
			i.Addr6 = netip.Prefix{}
			r.Interfaces = append(r.Interfaces, i)
		}
		stripped.Routers = append(stripped.Routers, r)
	}
	got, _ := json.Marshal(&stripped)
	want, _ := json.Marshal(v4.fabric)
	if string(got) != string(want) {
		t.Errorf("the dual-stack inventory without its IPv6 fields differs from the IPv4 one:\n%s\n%s", got, want)
	}
	var routes4 []routePlan
	for _, r := range dual.routes {
		if r.dst.Addr().Is4() {
			routes4 = append(routes4, r)
		}
	}
	if !slices.EqualFunc(routes4, v4.routes, func(a, b routePlan) bool {
		return a.ns == b.ns && a.dst == b.dst && slices.Equal(a.via, b.via)
	}) {
		t.Errorf("the dual-stack plan's IPv4 routes differ from the IPv4 plan's")
	}
	if len(dual.ns) != len(v4.ns) || len(dual.links) != len(v4.links) {
		t.Errorf("IPv6 changed the devices: %d namespaces, %d links; want %d, %d", len(dual.ns), len(dual.links), len(v4.ns), len(v4.links))
	}
}

// TestPlanThreeTiers: the largest three-tier fabric numbers every
// interface once in each family, every aggregation switch links to its
// pod's ToRs and to every super-spine, each super-spine routes every
// rack by ECMP over that rack's aggregation switches, no namespace holds
// two routes to one prefix, and Hops names every router address.
func TestPlanThreeTiers(t *testing.T) {
	t.Parallel()
	spec := Spec{Prefix: "abcdefghijkl", Spines: 8, SuperSpines: 8, RacksPerPod: 1, Racks: 9, NodesPerRack: 2, PodsPerNode: 1, LB: true, ControlPlane: true, IPv6: true}
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	p := newPlan(spec)
	seen := map[netip.Addr]string{}
	for _, l := range p.links {
		for _, e := range []linkEnd{l.a, l.b} {
			for _, a := range e.addrs {
				// A node holds its address on eth0 and on each pod veth.
				if other, dup := seen[a.Addr()]; dup && other != e.ns {
					t.Errorf("%v assigned in %s and %s/%s", a.Addr(), other, e.ns, e.dev)
				}
				seen[a.Addr()] = e.ns
				if !LabRange.Contains(a.Addr()) && !LabRange6.Contains(a.Addr()) {
					t.Errorf("%s/%s: %v outside the lab ranges", e.ns, e.dev, a)
				}
			}
		}
	}
	peers := map[string][]string{}
	for _, r := range p.fabric.Routers {
		for _, ifc := range r.Interfaces {
			if ifc.Peer != "" {
				peers[r.Name] = append(peers[r.Name], ifc.Peer)
			}
		}
	}
	for pod := 1; pod <= 9; pod++ {
		for a := 1; a <= 8; a++ {
			agg := aggName(pod, a)
			want := []string{torName(pod), "super1", "super2", "super3", "super4", "super5", "super6", "super7", "super8"}
			if got := peers[agg]; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Errorf("%s links to %v, want %v", agg, got, want)
			}
		}
	}
	type key struct {
		ns  string
		dst netip.Prefix
	}
	routes, ecmp := map[key]int{}, 0
	for _, r := range p.routes {
		k := key{r.ns, r.dst}
		if routes[k]++; routes[k] == 2 {
			t.Errorf("two routes in %s to %v", r.ns, r.dst)
		}
		if r.ns == p.fabric.Routers[0].Namespace && (r.dst == rackNodeNet(3) || r.dst == rackNodeNet6(3)) {
			ecmp++
			if len(r.via) != 8 {
				t.Errorf("super1 routes rack 3 via %d next hops, want its pod's 8 aggregation switches", len(r.via))
			}
		}
	}
	if ecmp != 2 {
		t.Errorf("super1 has %d routes to rack 3's nodes, want one a family", ecmp)
	}
	if p.fabric.Routers[0].Name != "super1" || p.fabric.Routers[0].Kind != KindSuper {
		t.Fatalf("first router %s (%s), want super1", p.fabric.Routers[0].Name, p.fabric.Routers[0].Kind)
	}
	hops := p.fabric.Hops()
	for _, r := range p.fabric.Routers {
		for _, ifc := range r.Interfaces {
			if hops[ifc.Addr.Addr().String()] != r.Name || hops[ifc.Addr6.Addr().String()] != r.Name {
				t.Errorf("Hops names %s's %v/%v %q/%q", r.Name, ifc.Addr, ifc.Addr6, hops[ifc.Addr.Addr().String()], hops[ifc.Addr6.Addr().String()])
			}
		}
	}
	// Printed before Up validates it, a spec without racks_per_pod
	// still says its shape, with the default.
	if got := (Spec{Spines: 2, Racks: 4, NodesPerRack: 1, SuperSpines: 2}).Shape(); !strings.Contains(got, "2 fabric pods of 2 racks") {
		t.Errorf("Shape() = %q, want 2 fabric pods of 2 racks", got)
	}
	if got := (Spec{Spines: 2, Racks: 2, NodesPerRack: 1, Overlay: true, SilentRouters: true}).Shape(); !strings.HasSuffix(got, "pods on a VXLAN overlay, silent routers") {
		t.Errorf("Shape() = %q, want it to end with the network's kinds", got)
	}
	if got := (Spec{Racks: 4, SuperSpines: 2, RacksPerPod: -1}).Shape(); got == "" {
		t.Error("Shape() of an invalid spec is empty")
	}
	for _, bad := range []Spec{
		{Spines: 2, Racks: 4, RacksPerPod: 2},
		{Spines: 2, Racks: 4, SuperSpines: 9},
		{Spines: 2, Racks: 4, SuperSpines: 2, RacksPerPod: 5},
	} {
		bad.SetDefaults()
		if bad.Validate() == nil {
			t.Errorf("%+v: valid, want an error", bad)
		}
	}
}
