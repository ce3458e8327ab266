package matrix_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// withLargeProbes adds to every tcp_syn target of obs the large probes a
// flow sends (tcp_syn_mtu: big of them, untraced), each lost as lost
// says of its tcp_syn flow's traced hops, named by hops.
func withLargeProbes(obs []api.Observations, hops map[string]string, big uint64, lost func(path []string) uint64) []api.Observations {
	for i := range obs {
		ts := obs[i].Targets
		for j := range ts {
			var large *api.Protocol
			for _, p := range ts[j].Protocols {
				if p.Protocol != api.ProtocolTCPSYN {
					continue
				}
				large = &api.Protocol{Protocol: api.ProtocolTCPSYNMTU}
				for _, f := range p.Flows {
					var names []string
					if f.Path != nil {
						for _, h := range f.Path.Hops {
							names = append(names, hops[h])
						}
					}
					st := api.Stats{Sent: big, Lost: min(lost(names), big)}
					large.Sent += st.Sent
					large.Lost += st.Lost
					large.Flows = append(large.Flows, api.Flow{SourcePort: f.SourcePort, Stats: st})
				}
			}
			if large != nil {
				ts[j].Protocols = append(ts[j].Protocols, *large)
			}
		}
	}
	return obs
}

// fabricOf is the fabric view after one round of obs.
func fabricOf(t *testing.T, hops map[string]string, obs []api.Observations) matrix.Fabric {
	t.Helper()
	m, _ := oneRound(t, hops, obs)
	return m.Fabric()
}

// crosses reports whether the named hops go from a straight to b.
func crosses(names []string, a, b string) bool {
	for k := 1; k < len(names); k++ {
		if names[k-1] == a && names[k] == b {
			return true
		}
	}
	return false
}

// TestPMTUBlackHole: one uplink of tor1 drops every packet over its MTU
// and says nothing. The flows that cross it lose all their large probes
// while their small ones pass: the link is named, alone, as a pmtu
// suspect, and nothing as loss. The same smaller MTU signalled (large
// probes counted sent, not lost) names nothing, and neither does a link
// that loses 5 % of everything, large probes as well.
func TestPMTUBlackHole(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 3, NodesPerRack: 3, Spines: 3, FlowsPerTarget: 8, ProbesPerFlow: 30, Background: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	hops := fab.Hops()
	healthy := matrixsim.Fault{Kind: matrixsim.Healthy}
	black := func(names []string) uint64 {
		if crosses(names, "tor1", "spine2") {
			return 4
		}
		return 0
	}
	d := diagnose(t, hops, withLargeProbes(fab.Observations(healthy, 1), hops, 4, black))
	listed := d.Listed()
	if len(listed) != 1 || listed[0].Kind != matrix.KindPMTU || listed[0].Name != "tor1->spine2" || listed[0].Score < 0.99 {
		t.Fatalf("black hole on tor1->spine2: listed %v, want pmtu/tor1->spine2 alone", brief(listed))
	}
	if ev := listed[0].Evidence; ev.Stage != "pmtu" || ev.LossyFlows < 2 || ev.LostProbes != ev.SentProbes {
		t.Errorf("evidence %+v: want the pmtu stage, the black-holed flows, every large probe lost", ev)
	}
	marked := 0
	for _, l := range fabricOf(t, hops, withLargeProbes(fab.Observations(healthy, 1), hops, 4, black)).Links {
		if l.Suspect {
			marked++
			if l.From != "tor1" || l.To != "spine2" {
				t.Errorf("the fabric marks %s->%s", l.From, l.To)
			}
		}
	}
	if marked != 1 {
		t.Errorf("the fabric marks %d links, want tor1->spine2", marked)
	}
	signalled := diagnose(t, hops, withLargeProbes(fab.Observations(healthy, 2), hops, 4, func([]string) uint64 { return 0 }))
	if l := signalled.Listed(); len(l) != 0 {
		t.Errorf("a signalled smaller MTU: listed %v, want nothing", brief(l))
	}
	lossy := matrixsim.Fault{Kind: matrixsim.LinkLoss, Loss: 0.05}
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(names []string) uint64 {
		n := uint64(0)
		for range 4 {
			if rng.Float64() < 0.05 {
				n++
			}
		}
		return n
	}
	for _, s := range diagnose(t, hops, withLargeProbes(fab.Observations(lossy, 3), hops, 4, random)).Listed() {
		if s.Kind == matrix.KindPMTU {
			t.Errorf("5 %% random loss: listed %s/%s at %.2f, want no black hole", s.Kind, s.Name, s.Score)
		}
	}
}

// TestPMTUBlackHoleSilent: on routers that never answer a trace no link
// can be named, and the black hole is the uplinks of the rack its flows
// leave or enter, with those flows' 5-tuples as the examples, as the
// tier stage names a silent fabric's loss.
func TestPMTUBlackHoleSilent(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 6, NodesPerRack: 4, Spines: 3, FlowsPerTarget: 4, ProbesPerFlow: 8,
		Background: 1e-4, SilentRouters: true, NoRackLabels: true, LargeEvery: 8})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 4 {
		ft := fab.Random(matrixsim.MTUBlackhole, 0, rng)
		kind, name := fab.Truth(ft)
		d := diagnose(t, fab.Hops(), fab.Observations(ft, uint64(trial)))
		listed := d.Listed()
		if len(listed) != 1 || listed[0].Kind != kind || listed[0].Name != name {
			t.Errorf("trial %d: listed %v, want %s/%s alone", trial, brief(listed), kind, name)
			continue
		}
		ev := listed[0].Evidence
		if !ev.Silent || ev.LossyFlows < 2 || len(ev.Examples) == 0 || len(ev.Links) != 0 {
			t.Errorf("trial %d: evidence %+v: want silent, the black-holed flows as examples, no link", trial, ev)
		}
		for _, x := range ev.Examples {
			if x.Protocol != api.ProtocolTCPSYNMTU || x.Lost != x.Sent || x.Sent == 0 || x.SourcePort == 0 || x.TargetAddress == "" {
				t.Errorf("trial %d: example %+v: want a tcp_syn_mtu 5-tuple that lost every large probe", trial, x)
			}
		}
	}
}

// TestPMTUExplainsLB: a black hole cuts off the TLS connections that
// carry the HTTP/2 PINGs to the API server's VIP (their handshakes and
// responses are full-size) for the agents at either end of a
// black-holed flow, while every small probe to the VIP passes: the hole
// is named and the LB is not. The same PINGs dying with no hole, or the
// VIP dropping SYNs beside the hole, still name the LB.
func TestPMTUExplainsLB(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 3, NodesPerRack: 3, Spines: 3, LB: true, FlowsPerTarget: 8, ProbesPerFlow: 30,
		Background: 1e-4, LargeEvery: 8})
	if err != nil {
		t.Fatal(err)
	}
	hole := matrixsim.Fault{Kind: matrixsim.MTUBlackhole, Rack: 0, Spine: 1, Up: true}
	holeKind, holeName := fab.Truth(hole)
	// cut marks the PINGs of every agent at an end of a black-holed
	// flow of obs lost, and with synLoss drops that share of every
	// agent's SYNs to the VIP.
	cut := func(obs []api.Observations, synLoss float64) []api.Observations {
		ends := map[string]bool{}
		for _, o := range obs {
			for _, tg := range o.Targets {
				for _, p := range tg.Protocols {
					for _, f := range p.Flows {
						if p.Protocol == api.ProtocolTCPSYNMTU && f.Sent > 0 && f.Lost == f.Sent {
							ends[o.Agent.Name], ends[tg.Name] = true, true
						}
					}
				}
			}
		}
		for i := range obs {
			for j := range obs[i].Targets {
				tg := &obs[i].Targets[j]
				if tg.Class != api.ClassLB {
					continue
				}
				for k := range tg.Protocols {
					p := &tg.Protocols[k]
					switch {
					case p.Protocol == api.ProtocolHTTP2Ping && ends[obs[i].Agent.Name]:
						p.Lost, p.LossRatio = p.Sent, 1
					case p.Protocol == api.ProtocolTCPSYN && synLoss > 0:
						p.Lost = uint64(synLoss * float64(p.Sent))
						for f := range p.Flows {
							fl := &p.Flows[f].Stats
							fl.Lost = uint64(synLoss * float64(fl.Sent))
						}
					}
				}
			}
		}
		if len(ends) == 0 {
			t.Fatal("no black-holed flow: the test's fault did not take")
		}
		return obs
	}
	lbListed := func(d matrix.Diagnosis) bool {
		return slices.ContainsFunc(d.Listed(), func(s matrix.Suspect) bool { return s.Kind == matrix.KindLB })
	}
	for seed := range uint64(4) {
		d := diagnose(t, fab.Hops(), cut(fab.Observations(hole, seed), 0))
		for _, s := range d.Listed() {
			if s.Kind != holeKind || s.Name != holeName && !s.TiedWith(matrix.Ref{Kind: holeKind, Name: holeName}) {
				t.Errorf("seed %d: the hole's PINGs: listed %v, want %s/%s alone", seed, brief(d.Listed()), holeKind, holeName)
				break
			}
		}
		if l := d.Listed(); len(l) == 0 {
			t.Errorf("seed %d: the hole not named", seed)
		}
		// The same sources' PINGs die, no hole: the LB (seed 001).
		noHole := cut(fab.Observations(hole, seed), 0)
		for i := range noHole {
			for j := range noHole[i].Targets {
				noHole[i].Targets[j].Protocols = slices.DeleteFunc(noHole[i].Targets[j].Protocols, func(p api.Protocol) bool { return p.Protocol == api.ProtocolTCPSYNMTU })
			}
		}
		if d := diagnose(t, fab.Hops(), noHole); !lbListed(d) {
			t.Errorf("seed %d: PINGs through the VIP die, no hole: listed %v, want the lb", seed, brief(d.Listed()))
		}
		if d := diagnose(t, fab.Hops(), cut(fab.Observations(hole, seed), 0.1)); !lbListed(d) {
			t.Errorf("seed %d: the VIP drops 10 %% of SYNs beside the hole: listed %v, want the lb too", seed, brief(d.Listed()))
		}
	}
}
