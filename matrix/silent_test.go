package matrix_test

import (
	"strings"
	"testing"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// TestSilentFabricSaysWhatItCan: on a fabric whose routers answer no
// trace, a lossy spine is its tier, marked silent, with the flows that
// lose (share and 5-tuples); one lossy uplink is its rack's uplinks; no
// device is named that nobody saw, and the same fabric answering traces
// still names the spine.
func TestSilentFabricSaysWhatItCan(t *testing.T) {
	t.Parallel()
	cfg := matrixsim.Config{Racks: 4, NodesPerRack: 4, Spines: 3, Pods: true, NoRackLabels: true,
		FlowsPerTarget: 8, ProbesPerFlow: 30, SilentRouters: true}
	fab, err := matrixsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spine := matrixsim.Fault{Kind: matrixsim.SpineLoss, Spine: 1, Loss: 0.05}
	d := diagnose(t, fab.Hops(), fab.Observations(spine, 1))
	l := d.Listed()
	if len(l) != 1 || l[0].Kind != matrix.KindTier || l[0].Name != "spine" {
		t.Fatalf("silent, spine2 at 5%%: listed %v, want tier spine alone", brief(l))
	}
	ev := l[0].Evidence
	if !ev.Silent || ev.LossyFlows == 0 || ev.CleanFlows == 0 || len(ev.Examples) == 0 {
		t.Errorf("tier spine: silent %v, %d lossy and %d clean flows, %d examples; want silent, both kinds of flow, examples",
			ev.Silent, ev.LossyFlows, ev.CleanFlows, len(ev.Examples))
	}
	for _, x := range ev.Examples {
		if x.Lost == 0 || x.SourceAddress == "" || x.TargetAddress == "" || x.SourcePort == 0 || x.TargetPort != matrixsim.AgentPort || x.Protocol != api.ProtocolTCPSYN {
			t.Errorf("example %+v: want a lossy flow with its whole 5-tuple", x)
		}
	}

	// A router that answers one trace of the many (a cloud's own gateway)
	// leaves the fabric silent, and the detail names it.
	obs := fab.Observations(spine, 1)
	var answer string
	for addr, dev := range fab.Hops() {
		if dev == matrixsim.SpineName(0) && (answer == "" || addr < answer) {
			answer = addr
		}
	}
	if !answerOneTrace(obs, answer) {
		t.Fatal("no traced flow with a silent middle hop")
	}
	if l := diagnose(t, fab.Hops(), obs).Listed(); len(l) != 1 || !l[0].Evidence.Silent || !strings.Contains(l[0].Evidence.Detail, answer) {
		t.Errorf("silent but for one trace that %s answered: listed %v; want tier spine alone, silent, naming %s", answer, brief(l), answer)
	}

	link := matrixsim.Fault{Kind: matrixsim.LinkLoss, Rack: 2, Spine: 0, Up: true, Loss: 0.05}
	kind, name := fab.Truth(link)
	if l := diagnose(t, fab.Hops(), fab.Observations(link, 2)).Listed(); len(l) != 1 || l[0].Kind != kind || l[0].Name != name || !l[0].Evidence.Silent {
		t.Errorf("silent, tor3->spine1 at 5%%: listed %v, want %s %s alone, silent", brief(l), kind, name)
	}

	cfg.SilentRouters = false
	heard, err := matrixsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kind, name = heard.Truth(spine)
	if l := diagnose(t, heard.Hops(), heard.Observations(spine, 1)).Listed(); len(l) != 1 || l[0].Kind != kind || l[0].Name != name {
		t.Errorf("routers answering, spine2 at 5%%: listed %v, want %s %s alone", brief(l), kind, name)
	}
}

// answerOneTrace makes addr answer the middle hop of the first traced
// flow of obs whose middle is silent.
func answerOneTrace(obs []api.Observations, addr string) bool {
	for _, o := range obs {
		for ti := range o.Targets {
			for pi := range o.Targets[ti].Protocols {
				for fi := range o.Targets[ti].Protocols[pi].Flows {
					p := o.Targets[ti].Protocols[pi].Flows[fi].Path
					if p != nil && len(p.Hops) >= 3 && p.Hops[len(p.Hops)/2] == "" {
						p.Hops[len(p.Hops)/2] = addr
						return true
					}
				}
			}
		}
	}
	return false
}

// TestSilentOverlayHostNamed: on a silent fabric under a VXLAN overlay
// (no router answers; pods' traces hear only hosts), a node's broken NIC
// is the host rule's finding alone. Two ways it was lost, both seen on
// a drawn lab shape (cmd/prober TestScenarios/drawn, seed 4): its own
// pod's flows, which cross the NIC, made the silent fabric's lossy class
// that then "explained" the node; and the selector, which had no traced
// flow across the node's own links, counted it as weighed and rejected.
func TestSilentOverlayHostNamed(t *testing.T) {
	t.Parallel()
	for _, three := range []bool{false, true} {
		cfg := matrixsim.Config{Racks: 4, NodesPerRack: 2, Spines: 2, Pods: true, Overlay: true, NoRackLabels: true,
			FlowsPerTarget: 8, ProbesPerFlow: 30, SilentRouters: true}
		if three {
			cfg.SuperSpines, cfg.RacksPerPod = 2, 2
		}
		fab, err := matrixsim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(4) {
			ft := matrixsim.Fault{Kind: matrixsim.HostNIC, Rack: int(seed % 4), Node: 1, Loss: 0.1}
			kind, name := fab.Truth(ft)
			if l := diagnose(t, fab.Hops(), fab.Observations(ft, seed)).Listed(); len(l) != 1 || l[0].Kind != kind || l[0].Name != name {
				t.Errorf("three tiers %v, seed %d: listed %v, want %s %s alone", three, seed, brief(l), kind, name)
			}
		}
	}
}

// TestTierBeyondInRack: a healthy three-tier fabric with pods, every link
// at a background of 9e-5 (a drawn trial's). A round trip between fabric
// pods crosses some 18 links and loses 0.13 %, past Healthy, while the
// in-rack pairs lose 0.06 %: the tier was listed at 1.00. The tier's own
// loss is what its pairs lose beyond the in-rack pairs.
func TestTierBeyondInRack(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{
		Racks: 15, NodesPerRack: 10, Spines: 8, SuperSpines: 7, RacksPerPod: 3,
		Pods: true, NoRackLabels: true, FlowsPerTarget: 6, ProbesPerFlow: 32,
		SilentHop: 0.3, Background: 9.25e-5,
	})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(4) {
		d := localize(t, fab, matrixsim.Fault{Kind: matrixsim.Healthy}, 5156+seed, nil)
		for _, s := range d.Listed() {
			t.Errorf("seed %d: healthy fabric listed %s %s at %.2f: %s", seed, s.Kind, s.Name, s.Score, s.Evidence.Detail)
		}
	}
}

// TestOneRackPodUplink: silent routers, a three-tier fabric whose last
// fabric pod is one rack (16 racks in pods of 3), and one of the 32 links
// out of that pod losing 3.5 % (a drawn trial's). Its few dozen sick
// flows are lost among every rack's, so the whole was not significant
// and the stage stopped before testing each rack: nothing was listed.
// Every losing pair touches that rack: its uplinks.
func TestOneRackPodUplink(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{
		Racks: 16, NodesPerRack: 8, Spines: 8, SuperSpines: 4, RacksPerPod: 3,
		Pods: true, NoRackLabels: true, SilentRouters: true,
		FlowsPerTarget: 9, ProbesPerFlow: 53, Background: 1e-5,
	})
	if err != nil {
		t.Fatal(err)
	}
	ft := matrixsim.Fault{Kind: matrixsim.SuperLinkLoss, Loss: 0.035, Pod: 5, Spine: 4, Super: 2, Up: true}
	kind, name := fab.Truth(ft)
	if kind != matrix.KindTier || name != "uplinks of tor16" {
		t.Fatalf("the simulator's truth is %s %s, want tier uplinks of tor16", kind, name)
	}
	for seed := range uint64(3) {
		d := localize(t, fab, ft, 7036+seed*1000, nil)
		found := false
		for _, s := range d.Listed() {
			if s.Kind == kind && s.Name == name {
				found = true
			} else {
				t.Errorf("seed %d: %s %s listed at %.2f", seed, s.Kind, s.Name, s.Score)
			}
		}
		if !found {
			t.Errorf("seed %d: %s %s not listed (listed %+v)", seed, kind, name, d.Listed())
		}
	}
}
