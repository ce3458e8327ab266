package matrix_test

import (
	"fmt"
	"net/netip"
	"strings"
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

// ipv6Reports is obs renumbered into IPv6: every target, agent, host
// (tunnel, gateway) and traced hop address.
func ipv6Reports(obs []api.Observations) []api.Observations {
	out := make([]api.Observations, len(obs))
	for i, o := range obs {
		o.Agent.Address = as6(o.Agent.Address)
		o.Agent.FirstHop = as6(o.Agent.FirstHop)
		if len(o.Agent.HostAddresses) > 0 {
			hs := make([]string, len(o.Agent.HostAddresses))
			for h, a := range o.Agent.HostAddresses {
				hs[h] = as6(a)
			}
			o.Agent.HostAddresses = hs
		}
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

// hops6 is fab's hops, each router address with its IPv6 twin (as6).
func hops6(fab *matrixsim.Fabric) map[string]string {
	hops := fab.Hops()
	for addr, name := range fab.Hops() {
		hops[as6(addr)] = name
	}
	return hops
}

// diagnose is one round of obs on a new matrix grouped by rack.
func diagnose(t testing.TB, hops map[string]string, obs []api.Observations) matrix.Diagnosis {
	t.Helper()
	_, d := oneRound(t, hops, obs)
	return d
}

// oneRound observes obs on a new matrix grouped by rack and localizes
// once: the matrix, for its views, and the diagnosis.
func oneRound(t testing.TB, hops map[string]string, obs []api.Observations) (*matrix.Matrix, matrix.Diagnosis) {
	t.Helper()
	m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: hops})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range obs {
		if err := m.Observe(t0, o); err != nil {
			t.Fatal(err)
		}
	}
	return m, m.Localize(t0)
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
	hops := hops6(fab)
	lossy := matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.05}
	healthy := matrixsim.Fault{Kind: matrixsim.Healthy}
	wantKind, wantName := fab.Truth(lossy)
	run := func(obs []api.Observations) matrix.Diagnosis { return diagnose(t, hops, obs) }
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

// TestTierExplainedByOtherFamily: a spine drops both families, and one
// family's traces cannot see it (as a dual-stack cluster's IPv6 flows on
// an overlay, or routers that answer one family only) while the other's
// name it. Alone, the blind family lists the spine tier; together, the
// named spine explains it: the spine is listed alone, for both families.
func TestTierExplainedByOtherFamily(t *testing.T) {
	t.Parallel()
	shape := matrixsim.Config{Racks: 6, NodesPerRack: 4, Spines: 4, FlowsPerTarget: 4, ProbesPerFlow: 16}
	fab, err := matrixsim.New(shape)
	if err != nil {
		t.Fatal(err)
	}
	shape.SilentRouters = true
	blind, err := matrixsim.New(shape)
	if err != nil {
		t.Fatal(err)
	}
	hops := hops6(fab)
	lossy := matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.05, Spine: 1}
	wantKind, wantName := fab.Truth(lossy)
	alone := diagnose(t, hops, ipv6Reports(blind.Observations(lossy, 2))).Listed()
	if len(alone) == 0 || alone[0].Kind != matrix.KindTier {
		t.Fatalf("the blind family alone listed %v, want the tier first (the test's premise)", brief(alone))
	}
	for _, order := range []string{"ipv6 blind", "ipv4 blind"} {
		obs := dualStack(fab.Observations(lossy, 1), blind.Observations(lossy, 2))
		if order == "ipv4 blind" {
			obs = dualStack(blind.Observations(lossy, 2), fab.Observations(lossy, 1))
		}
		listed := diagnose(t, hops, obs).Listed()
		if len(listed) != 1 || listed[0].Kind != wantKind || listed[0].Name != wantName || listed[0].Family != "" {
			t.Errorf("%s: listed %v, want %s/%s alone for both families", order, brief(listed), wantKind, wantName)
		}
	}
}

// TestTieBrokenByOtherFamily: a spine drops both families of a
// dual-stack cluster of TestCluster's shape. Over IPv4 the pods' flows
// ride a VXLAN overlay, whose underlay spine no trace shows, and in the
// round drawn the IPv4 data cannot tell the two spines apart: a tie.
// Over IPv6 the pods are routed and their traces name the spine. The
// merged list names the spine alone, for both families, with the whole
// score.
func TestTieBrokenByOtherFamily(t *testing.T) {
	t.Parallel()
	shape := matrixsim.Config{Racks: 2, NodesPerRack: 2, Spines: 2, LB: true, Pods: true, Overlay: true,
		FlowsPerTarget: 8, ProbesPerFlow: 7, SilentHop: 0.2, Background: 1e-4}
	overlay, err := matrixsim.New(shape)
	if err != nil {
		t.Fatal(err)
	}
	shape.Overlay = false
	routed, err := matrixsim.New(shape)
	if err != nil {
		t.Fatal(err)
	}
	hops := hops6(overlay)
	for a, n := range hops6(routed) {
		hops[a] = n
	}
	lossy := matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.05, Spine: 1}
	wantKind, wantName := overlay.Truth(lossy)
	const tiedSeed = 75 // an IPv4 round whose data cannot tell the spines apart
	alone := diagnose(t, hops, overlay.Observations(lossy, tiedSeed)).Listed()
	if len(alone) != 2 || alone[0].Kind != matrix.KindDevice || alone[1].Kind != matrix.KindDevice || len(alone[0].Evidence.Ties) != 1 {
		t.Fatalf("IPv4 alone listed %v, want both spines tied (the test's premise)", brief(alone))
	}
	six := diagnose(t, hops, ipv6Reports(routed.Observations(lossy, 1))).Listed()
	if len(six) != 1 || six[0].Kind != wantKind || six[0].Name != wantName {
		t.Fatalf("IPv6 alone listed %v, want %s/%s alone (the test's premise)", brief(six), wantKind, wantName)
	}
	listed := diagnose(t, hops, dualStack(overlay.Observations(lossy, tiedSeed), routed.Observations(lossy, 1))).Listed()
	if len(listed) != 1 || listed[0].Kind != wantKind || listed[0].Name != wantName || listed[0].Family != "" {
		t.Fatalf("dual-stack listed %v, want %s/%s alone for both families", brief(listed), wantKind, wantName)
	}
	if s := listed[0]; len(s.Evidence.Ties) != 0 || s.Score < 0.9 || !strings.Contains(s.Evidence.Detail, "IPv6 flows tell them apart") {
		t.Errorf("the spine named with ties %v, score %.2f, detail %q; want no tie, the group's score and why", s.Evidence.Ties, s.Score, s.Evidence.Detail)
	}
	// Both families tied: nothing tells, the tie stands.
	both := diagnose(t, hops, dualStack(overlay.Observations(lossy, tiedSeed), overlay.Observations(lossy, tiedSeed))).Listed()
	if len(both) != 2 {
		t.Errorf("both families tied: listed %v, want the tie to stand", brief(both))
	}
}

func brief(ss []matrix.Suspect) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Kind+"/"+s.Name+" family="+s.Family)
	}
	return out
}

// repliesShape is the lab's shape (3 racks of 3 nodes, a pod each, 3
// spines) with flows x probes a target, its replies per probe or not.
func repliesShape(flows, probes int, perProbe bool) matrixsim.Config {
	return matrixsim.Config{Racks: 3, NodesPerRack: 3, Spines: 3, LB: true, Pods: true,
		FlowsPerTarget: flows, ProbesPerFlow: probes, SilentHop: 0.1, Background: 1e-4, ReplyPerProbe: perProbe}
}

// innocentListings breaks each spine, and a downlink of each, at 5 % on
// cfg, 8 seeds each (48 rounds), reads the reports as family, and counts
// the suspects listed that are not the fault; each is passed to seen.
func innocentListings(t testing.TB, cfg matrixsim.Config, family string, seen func(ft string, seed uint64, l matrix.Suspect)) (innocent, rounds int) {
	t.Helper()
	fab, err := matrixsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hops := hops6(fab)
	for s := range cfg.Spines {
		for _, ft := range []matrixsim.Fault{
			{Kind: matrixsim.SpineLoss, Loss: 0.05, Spine: s},
			{Kind: matrixsim.LinkLoss, Loss: 0.05, Spine: s, Rack: s},
		} {
			kind, name := fab.Truth(ft)
			for seed := range uint64(8) {
				rounds++
				obs := fab.Observations(ft, seed)
				if family == api.FamilyIPv6 {
					obs = ipv6Reports(obs)
				}
				for _, l := range diagnose(t, hops, obs).Listed() {
					if l.Kind != kind || l.Name != name {
						innocent++
						seen(kind+" "+name, seed, l)
					}
				}
			}
		}
	}
	return innocent, rounds
}

// TestRepliesPerProbe: on the lab's shape, a lossy spine or downlink
// whose replies take a spine per probe (IPv6 targets that label each
// SYN-ACK afresh, a fabric that hashes labels), and whose replies keep
// one. Over IPv6, where the selector weighs both, nothing but the fault
// is listed in either; the per-probe reports read as IPv4, whose model
// keeps a flow's replies on one path, list innocent spines: the contrast.
func TestRepliesPerProbe(t *testing.T) {
	t.Parallel()
	for _, perProbe := range []bool{true, false} {
		cfg := repliesShape(8, 64, perProbe)
		n, rounds := innocentListings(t, cfg, api.FamilyIPv6, func(ft string, seed uint64, l matrix.Suspect) {
			t.Errorf("replies per probe %v, ipv6: %s, seed %d: %s %s listed at %.2f", perProbe, ft, seed, l.Kind, l.Name, l.Score)
		})
		t.Logf("replies per probe %v: %d innocent listings in %d rounds over IPv6", perProbe, n, rounds)
	}
	if n, rounds := innocentListings(t, repliesShape(8, 64, true), api.FamilyIPv4, func(string, uint64, matrix.Suspect) {}); n == 0 {
		t.Errorf("read as IPv4, replies per probe listed no innocent in %d rounds: the contrast is gone, and the test proves nothing", rounds)
	} else {
		t.Logf("the same per-probe reports read as IPv4: %d innocent listings in %d rounds", n, rounds)
	}
}

// TestReplySpreadSweep (-eval) is how replySpread's IPv6 share was
// chosen: innocent listings over IPv6 at each share, on the lab's shape
// at several flows x probes, replies per probe or per flow. At the
// share in use, neither kind of reply may list more than the one-path
// model (share 0) does.
func TestReplySpreadSweep(t *testing.T) {
	if !*evalFull {
		t.Skip("the sweep runs with -eval")
	}
	chosen := matrix.SetIPv6ReplySpread(0)
	defer matrix.SetIPv6ReplySpread(chosen)
	shapes := [][2]int{{8, 16}, {4, 32}, {8, 64}, {2, 128}}
	t.Logf("| share | replies | %dx%d | %dx%d | %dx%d | %dx%d |", shapes[0][0], shapes[0][1], shapes[1][0], shapes[1][1], shapes[2][0], shapes[2][1], shapes[3][0], shapes[3][1])
	type key struct {
		share    float64
		perProbe bool
		shape    int
	}
	listed := map[key]int{}
	for _, share := range []float64{0, 0.5, 0.8, 0.9, 0.95, chosen} {
		if _, done := listed[key{share, true, 0}]; done {
			continue // chosen is one of the shares swept
		}
		matrix.SetIPv6ReplySpread(share)
		for _, perProbe := range []bool{true, false} {
			row := fmt.Sprintf("| %.2f | per probe %v |", share, perProbe)
			for i, sh := range shapes {
				n, rounds := innocentListings(t, repliesShape(sh[0], sh[1], perProbe), api.FamilyIPv6, func(string, uint64, matrix.Suspect) {})
				listed[key{share, perProbe, i}] = n
				row += fmt.Sprintf(" %d of %d |", n, rounds)
			}
			t.Log(row)
		}
	}
	for _, perProbe := range []bool{true, false} {
		for i, sh := range shapes {
			if got, base := listed[key{chosen, perProbe, i}], listed[key{0, perProbe, i}]; got > base {
				t.Errorf("replies per probe %v, %dx%d: %d innocent listings at share %.2f, %d with one path", perProbe, sh[0], sh[1], got, chosen, base)
			}
		}
	}
}
