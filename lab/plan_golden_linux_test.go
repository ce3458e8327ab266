package lab

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current plan")

// dumpPlan renders everything Up would create from p as text: the JSON
// inventory, then each namespace with its sysctls, addresses, links and
// routes.
func dumpPlan(p *plan) string {
	var b strings.Builder
	j, err := json.MarshalIndent(p.fabric, "", "  ")
	if err != nil {
		panic(err)
	}
	b.Write(j)
	b.WriteString("\n")
	for i, n := range p.ns {
		fmt.Fprintf(&b, "ns %s %s %s\n", n.name, n.device, n.kind)
		for _, s := range sysctlsFor(n.kind, i, p.fabric.Spec) {
			fmt.Fprintf(&b, "  sysctl %s=%s optional=%v\n", s.key, s.value, s.optional)
		}
	}
	for _, a := range p.addrs {
		fmt.Fprintf(&b, "addr %s %s %s\n", a.ns, a.dev, a.addr)
	}
	for _, l := range p.links {
		fmt.Fprintf(&b, "link %s %s %s %s <-> %s %s %s %s\n", l.a.ns, l.a.dev, l.a.master, addrList(l.a.addrs), l.b.ns, l.b.dev, l.b.master, addrList(l.b.addrs))
	}
	for _, r := range p.routes {
		fmt.Fprintf(&b, "route %s %s via", r.ns, r.dst)
		for _, nh := range r.via {
			fmt.Fprintf(&b, " %s/%v", nh.dev, nh.gw)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// addrList prints a link end's addresses; "invalid Prefix" for none, as
// the plan's single address printed before IPv6.
func addrList(addrs []netip.Prefix) string {
	if len(addrs) == 0 {
		return netip.Prefix{}.String()
	}
	var s []string
	for _, a := range addrs {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}

// TestPlanGolden pins the plans: a fabric without IPv6 is the one every
// earlier version built, address for address and route for route; the
// dual-stack one shows the IPv6 plan whole.
func TestPlanGolden(t *testing.T) {
	t.Parallel()
	cluster := Spec{Prefix: "c", Spines: 2, Racks: 2, NodesPerRack: 2, PodsPerNode: -1, LB: true, ControlPlane: true, PodCIDRs: true}
	dual := Spec{Prefix: "d", Spines: 2, Racks: 2, NodesPerRack: 2, PodsPerNode: 1, LB: true, IPv6: true}
	overlay := cluster
	overlay.Overlay, overlay.IPv6 = true, true
	for name, spec := range map[string]Spec{"default": DefaultSpec(), "cluster": cluster, "dual": dual, "cluster-overlay": overlay} {
		t.Run(name, func(t *testing.T) {
			spec.SetDefaults()
			got := dumpPlan(newPlan(spec))
			path := filepath.Join("testdata", "plan-"+name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("plan %s differs from %s (go test -run TestPlanGolden -update rewrites it)", name, path)
			}
		})
	}
}

// TestFreshLabels: hosts reflect the flow label they are sent unless the
// spec leaves them labelling replies afresh; routers never reflect.
func TestFreshLabels(t *testing.T) {
	reflects := func(kind string, spec Spec) bool {
		for _, s := range sysctlsFor(kind, 0, spec) {
			if s.key == "net.ipv6.flowlabel_reflect" {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		kind        string
		ipv6, fresh bool
		want        bool
	}{
		{ClassNode, true, false, true}, {ClassPod, true, false, true}, {ClassControlPlane, true, false, true},
		{ClassNode, true, true, false}, {ClassPod, true, true, false},
		{ClassNode, false, false, false}, {KindSpine, true, false, false},
	} {
		if got := reflects(tc.kind, Spec{IPv6: tc.ipv6, FreshLabels: tc.fresh}); got != tc.want {
			t.Errorf("%s, ipv6 %v, fresh labels %v: reflects %v, want %v", tc.kind, tc.ipv6, tc.fresh, got, tc.want)
		}
	}
}
