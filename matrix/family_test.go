package matrix_test

import (
	"net/netip"
	"testing"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// as6 renumbers an IPv4 address of the simulator into IPv6 (the
// RFC 3849 documentation prefix), "" and non-addresses unchanged.
func as6(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return s
	}
	b := a.As4()
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}).String()
}

// ipv6Reports is obs renumbered into IPv6: every target, agent and
// traced hop address.
func ipv6Reports(obs []api.Observations) []api.Observations {
	out := make([]api.Observations, len(obs))
	for i, o := range obs {
		o.Agent.Address = as6(o.Agent.Address)
		o.Agent.FirstHop = as6(o.Agent.FirstHop)
		ts := make([]api.Target, len(o.Targets))
		for j, t := range o.Targets {
			t.Address, t.Family = as6(t.Address), api.FamilyIPv6
			ps := make([]api.Protocol, len(t.Protocols))
			for k, p := range t.Protocols {
				fs := make([]api.Flow, len(p.Flows))
				for l, f := range p.Flows {
					if f.Path != nil {
						path := *f.Path
						path.Hops = make([]string, len(f.Path.Hops))
						for h, hop := range f.Path.Hops {
							path.Hops[h] = as6(hop)
						}
						f.Path = &path
					}
					fs[l] = f
				}
				p.Flows = fs
				ps[k] = p
			}
			t.Protocols = ps
			ts[j] = t
		}
		o.Targets = ts
		out[i] = o
	}
	return out
}

// dualStack joins one round's IPv4 reports with another round's, renumbered
// to IPv6: each agent reports both families under its one name.
func dualStack(v4, v6 []api.Observations) []api.Observations {
	v6 = ipv6Reports(v6)
	out := make([]api.Observations, len(v4))
	for i, o := range v4 {
		o.Agent.Addresses = []string{o.Agent.Address, v6[i].Agent.Address}
		for j := range o.Targets {
			o.Targets[j].Family = api.FamilyIPv4
		}
		o.Targets = append(o.Targets, v6[i].Targets...)
		out[i] = o
	}
	return out
}

// TestDualStackFamilies: a dual-stack cluster is localized per family. A
// spine that drops IPv6 only is named with its family, a spine that drops
// both without one, and a single-stack IPv6 cluster as ever.
func TestDualStackFamilies(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 8, NodesPerRack: 6, Spines: 4, FlowsPerTarget: 4, ProbesPerFlow: 8})
	if err != nil {
		t.Fatal(err)
	}
	hops := fab.Hops()
	for addr, name := range fab.Hops() {
		hops[as6(addr)] = name
	}
	lossy := matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.05}
	healthy := matrixsim.Fault{Kind: matrixsim.Healthy}
	wantKind, wantName := fab.Truth(lossy)
	run := func(obs []api.Observations) matrix.Diagnosis {
		m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: hops})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range obs {
			if err := m.Observe(t0, o); err != nil {
				t.Fatal(err)
			}
		}
		return m.Localize(t0)
	}
	cases := []struct {
		name       string
		obs        []api.Observations
		wantFamily string
	}{
		{"ipv6 only fault", dualStack(fab.Observations(healthy, 1), fab.Observations(lossy, 2)), api.FamilyIPv6},
		{"ipv4 only fault", dualStack(fab.Observations(lossy, 3), fab.Observations(healthy, 4)), api.FamilyIPv4},
		{"both families", dualStack(fab.Observations(lossy, 5), fab.Observations(lossy, 6)), ""},
		{"single-stack ipv6", ipv6Reports(fab.Observations(lossy, 7)), ""},
	}
	for _, c := range cases {
		d := run(c.obs)
		listed := d.Listed()
		if len(listed) != 1 || listed[0].Kind != wantKind || listed[0].Name != wantName || listed[0].Family != c.wantFamily {
			t.Errorf("%s: listed %+v, want %s/%s family %q alone", c.name, brief(listed), wantKind, wantName, c.wantFamily)
		}
	}
	if d := run(dualStack(fab.Observations(healthy, 8), fab.Observations(healthy, 9))); len(d.Listed()) != 0 {
		t.Errorf("healthy dual-stack: listed %+v", brief(d.Listed()))
	}
}

func brief(ss []matrix.Suspect) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Kind+"/"+s.Name+" family="+s.Family)
	}
	return out
}
