package lab

import (
	"net/netip"
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
			if e.addr.IsValid() {
				own(e.addr.Addr(), e.ns+"/"+e.dev)
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
		{"no kind", f, Fault{}, "kind: missing"},
		{"host as device", f, Fault{Kind: FaultDeviceLoss, Device: "n11", Permille: 5}, `device: unknown device "n11" (one of spine1, spine2, spine3, tor1, tor2, tor3, lb)`},
		{"missing permille", f, Fault{Kind: FaultLBLoss}, "permille: 0 not in 1..1000"},
		{"link not adjacent", f, Fault{Kind: FaultLinkLoss, From: "spine1", To: "spine2", Permille: 5}, "spine1 has no link to spine2"},
		{"unknown host", f, Fault{Kind: FaultHostNIC, Host: "n44", Permille: 5}, `host: unknown host "n44"`},
		{"unknown zone", f, Fault{Kind: FaultPartition, Zone: "z7"}, `zone: unknown zone "z7" (z1..z3)`},
		{"stray field", f, Fault{Kind: FaultBlackhole, Device: "spine1", Mod: 4, Permille: 3}, "permille: not used by blackhole"},
		{"no lb", newPlan(noLB).fabric, Fault{Kind: FaultLBForget}, "this lab has no LB"},
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
