package matrix_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// TestCollusionFramesNoLink (issue 30): agents that replay their real
// traced paths and claim loss on exactly the flows through one spine, as
// a hostile pod or a broken agent would, frame neither the link from
// their ToR to it nor their rack's uplinks while they are a minority of
// the agents whose flows cross it; the link is disputed, naming them. A
// majority is indistinguishable from a lossy link, and a real lossy link
// is named with nothing disputed.
func TestCollusionFramesNoLink(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		nodes, liars int
		silent       bool
		framed       bool
	}{
		{5, 1, false, false}, {5, 2, false, false}, {11, 5, false, false},
		{5, 2, true, false},
		{5, 3, false, true},
	} {
		cfg := matrixsim.Config{Racks: 3, NodesPerRack: c.nodes, Spines: 3, FlowsPerTarget: 8, ProbesPerFlow: 30,
			SilentHop: 0.1, Background: 1e-4, SilentRouters: c.silent}
		fab, err := matrixsim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(1); seed <= 3; seed++ {
			obs := fab.Observations(matrixsim.Fault{}, seed)
			var liars []string
			for n := range c.liars {
				liars = append(liars, fab.NodeName(0, n))
			}
			pick := matrixsim.Through(fab.Hops(), matrixsim.SpineName(1))
			if c.silent {
				pick = matrixsim.OutOf(fab.RackName(0))
			}
			matrixsim.Collude(obs, 0.3, pick, liars...)
			d := diagnose(t, fab.Hops(), obs)
			l := d.Listed()
			at := fmt.Sprintf("%d liars of %d, silent %v, seed %d", c.liars, c.nodes, c.silent, seed)
			if c.framed {
				if len(l) != 1 || l[0].Name != "tor1->spine2" {
					t.Errorf("%s: listed %v, want the link: a majority looks like a lossy link", at, brief(l))
				}
				continue
			}
			if len(l) > 0 {
				t.Errorf("%s: listed %v, want nothing", at, brief(l))
			}
			if len(d.Disputed) == 0 {
				t.Errorf("%s: nothing disputed", at)
				continue
			}
			ds := d.Disputed[0]
			if !c.silent && (ds.Kind != matrix.KindLink || ds.Name != "tor1->spine2" || !slices.Equal(ds.Confirmers, liars) || ds.Contradicting < c.nodes-c.liars) {
				t.Errorf("%s: disputed %+v, want tor1->spine2 confirmed by %v alone, contradicted by the rest", at, ds, liars)
			}
			if c.silent && (ds.Kind != matrix.KindTier || ds.Name != "uplinks of "+fab.RackName(0) || !slices.Equal(ds.Confirmers, liars) || ds.Contradicting == 0) {
				t.Errorf("%s: disputed %+v, want the uplinks of %s confirmed by %v alone", at, ds, fab.RackName(0), liars)
			}
		}
	}

	cfg := matrixsim.Config{Racks: 3, NodesPerRack: 5, Spines: 3, FlowsPerTarget: 8, ProbesPerFlow: 30, SilentHop: 0.1, Background: 1e-4}
	fab, err := matrixsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ft := range []matrixsim.Fault{
		{Kind: matrixsim.LinkLoss, Rack: 0, Spine: 1, Up: true, Loss: 0.05},
		{Kind: matrixsim.LinkLoss, Rack: 0, Spine: 1, Up: true, Loss: 0.02},
		{Kind: matrixsim.LinkLoss, Rack: 2, Spine: 0, Up: false, Loss: 0.05},
	} {
		kind, name := fab.Truth(ft)
		for seed := uint64(1); seed <= 3; seed++ {
			d := diagnose(t, fab.Hops(), fab.Observations(ft, seed))
			if l := d.Listed(); len(l) != 1 || l[0].Kind != kind || l[0].Name != name || len(d.Disputed) > 0 {
				t.Errorf("%s %s at %v, seed %d: listed %v, disputed %+v; want it alone, nothing disputed", kind, name, ft.Loss, seed, brief(l), d.Disputed)
			}
		}
	}
}
