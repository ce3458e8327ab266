package matrix_test

import (
	"testing"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// viewRound feeds one round of fab's reports under fault ft to a matrix
// grouped by rack and localizes it.
func viewRound(t *testing.T, fab *matrixsim.Fabric, ft matrixsim.Fault, seed uint64) (*matrix.Matrix, matrix.Diagnosis) {
	t.Helper()
	m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops()})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range fab.Observations(ft, seed) {
		if err := m.Observe(t0, o); err != nil {
			t.Fatal(err)
		}
	}
	return m, m.Localize(t0)
}

// TestFabricView: the topology the page draws has the simulator's hosts
// under their ToRs, the spines above, the lossy spine marked with its
// suspect kind and the lossiest, and its links the lossy ones.
func TestFabricView(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 4, NodesPerRack: 3, Spines: 3, FlowsPerTarget: 4, ProbesPerFlow: 8, Pods: true, LB: true})
	if err != nil {
		t.Fatal(err)
	}
	lossy := matrixsim.Fault{Kind: matrixsim.SpineLoss, Spine: 1, Loss: 0.05}
	kind, name := fab.Truth(lossy)
	m, d := viewRound(t, fab, lossy, 1)
	if l := d.Listed(); len(l) != 1 || l[0].Name != name {
		t.Fatalf("listed %v, want %s alone", brief(l), name)
	}
	f := m.Fabric()
	byName := map[string]matrix.FabricDevice{}
	for _, dv := range f.Devices {
		byName[dv.Name] = dv
	}
	for r := range 4 {
		tor := byName[matrixsim.TorName(r)]
		if tor.Role != matrix.RoleToR || tor.Tier != 1 {
			t.Errorf("%s: role %q tier %d, want tor 1", tor.Name, tor.Role, tor.Tier)
		}
		for n := range 3 {
			h := byName[fab.NodeName(r, n)]
			if h.Role != matrix.RoleHost || h.Parent != tor.Name || h.Group == "" {
				t.Errorf("node %s: %+v, want a host under %s with a group", fab.NodeName(r, n), h, tor.Name)
			}
		}
	}
	pods := 0
	for _, dv := range f.Devices {
		if dv.Role == matrix.RolePod {
			pods++
			if byName[dv.Parent].Role != matrix.RoleHost {
				t.Errorf("pod %s: parent %q is no node", dv.Name, dv.Parent)
			}
		}
	}
	if pods != 12 {
		t.Errorf("%d pods, want 12", pods)
	}
	var lbs []string
	for s := range 3 {
		sp := byName[matrixsim.SpineName(s)]
		if sp.Role != matrix.RoleSpine || sp.Tier != 2 {
			t.Errorf("%s: role %q tier %d, want spine 2", sp.Name, sp.Role, sp.Tier)
		}
		if sp.Name == name {
			if sp.Suspect != kind {
				t.Errorf("%s: suspect %q, want %q", sp.Name, sp.Suspect, kind)
			}
		} else if sp.Suspect != "" || sp.EstimatedLoss >= byName[name].EstimatedLoss {
			t.Errorf("innocent %s: suspect %q, loss %.4f (the lossy spine's %.4f)", sp.Name, sp.Suspect, sp.EstimatedLoss, byName[name].EstimatedLoss)
		}
	}
	for _, dv := range f.Devices {
		if dv.Role == matrix.RoleLB {
			lbs = append(lbs, dv.Name)
			if dv.Tier != 3 {
				t.Errorf("lb %s: tier %d, want 3 (above the spines)", dv.Name, dv.Tier)
			}
		}
	}
	if len(lbs) != 1 {
		t.Errorf("lbs %v, want one", lbs)
	}
	// Innocent ToRs and hosts under the lossy spine are not coloured
	// like it: one lossy uplink each is the spine's.
	for _, dv := range f.Devices {
		if dv.Name != name && (dv.Role == matrix.RoleToR || dv.Role == matrix.RoleHost) && dv.EstimatedLoss > byName[name].EstimatedLoss/2 {
			t.Errorf("innocent %s %s: estimated loss %.4f, the lossy spine's %.4f", dv.Role, dv.Name, dv.EstimatedLoss, byName[name].EstimatedLoss)
		}
	}
	var worst matrix.FabricLink
	for _, l := range f.Links {
		if l.EstimatedLoss > worst.EstimatedLoss {
			worst = l
		}
		if l.Flows <= 0 {
			t.Errorf("link %s->%s: %d flows", l.From, l.To, l.Flows)
		}
	}
	if worst.From != name && worst.To != name {
		t.Errorf("lossiest link %s->%s does not touch %s", worst.From, worst.To, name)
	}

	// The healthy fabric marks nothing.
	m, _ = viewRound(t, fab, matrixsim.Fault{Kind: matrixsim.Healthy}, 2)
	for _, dv := range m.Fabric().Devices {
		if dv.Suspect != "" {
			t.Errorf("healthy: %s marked %q", dv.Name, dv.Suspect)
		}
	}
}

// TestCrossingAndPair: the cells a spine's flows feed are rack pairs whose
// lossy flows cross it; a ToR feeds only its own rack's cells; the pair
// picked to trace a cell is in that cell and the lossiest.
func TestCrossingAndPair(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 4, NodesPerRack: 3, Spines: 3, FlowsPerTarget: 4, ProbesPerFlow: 8})
	if err != nil {
		t.Fatal(err)
	}
	lossy := matrixsim.Fault{Kind: matrixsim.SpineLoss, Spine: 1, Loss: 0.2}
	_, name := fab.Truth(lossy)
	m, _ := viewRound(t, fab, lossy, 3)

	cells := m.Crossing(t0, name)
	if len(cells) == 0 {
		t.Fatalf("no cell crosses %s", name)
	}
	lossyFlows := 0
	for _, c := range cells {
		if c.Source == c.Target || c.Path != api.PathNodeToNode || c.Flows == 0 {
			t.Errorf("spine cell %+v: want an inter-rack node_to_node cell with flows", c)
		}
		lossyFlows += c.LossyFlows
	}
	if lossyFlows == 0 {
		t.Errorf("no lossy flow crosses %s", name)
	}
	tor := matrixsim.TorName(0)
	rack := ""
	for _, c := range m.Crossing(t0, tor) {
		if rack == "" {
			rack = c.Source
		}
		if c.Source != rack && c.Target != rack {
			t.Errorf("%s feeds %s->%s, outside its rack %s", tor, c.Source, c.Target, rack)
		}
	}
	if got := m.Crossing(t0, "no-such-device"); len(got) != 0 {
		t.Errorf("an unknown device crosses %d cells", len(got))
	}

	snap := m.Snapshot(t0)
	c := cells[0]
	p, ok := m.PairFor(t0, c.Source, c.Target, c.Path, c.Family)
	if !ok {
		t.Fatalf("no pair for cell %+v", c)
	}
	var pairLoss float64
	inCell := false
	for _, a := range snap.Agents {
		if a.Name == p.Agent && a.Group == c.Source {
			inCell = true
		}
	}
	if !inCell {
		t.Errorf("pair %+v: its agent is not in group %s", p, c.Source)
	}
	if p.Sent > 0 {
		pairLoss = float64(p.Lost) / float64(p.Sent)
	}
	if q, ok := m.PairFor(t0, c.Source, c.Target, c.Path, ""); !ok || q.Agent != p.Agent || q.Target != p.Target {
		t.Errorf("any family: pair %+v (found %v), want %+v", q, ok, p)
	}
	if _, ok := m.PairFor(t0, c.Source, c.Target, api.PathPodToPod, c.Family); ok {
		t.Errorf("a pair for a path nobody probes")
	}
	t.Logf("cell %s->%s: pair %s->%s lost %.3f", c.Source, c.Target, p.Agent, p.Target, pairLoss)
}

// BenchmarkCrossing5000 is the page's "cells a device's flows cross" at
// 5,000 nodes, for a spine (every rack pair) and a ToR; the hub runs it
// under its lock, so it bounds how long a click delays a round.
func BenchmarkCrossing5000(b *testing.B) {
	fab, err := matrixsim.New(matrixsim.Config{Racks: 125, NodesPerRack: 40, Spines: 8, LB: true,
		FlowsPerTarget: 4, ProbesPerFlow: 2, SilentHop: 0.05, Background: 1e-4})
	if err != nil {
		b.Fatal(err)
	}
	m, _ := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops()})
	for _, o := range fab.Observations(matrixsim.Fault{Kind: matrixsim.Healthy}, 1) {
		m.Observe(t0, o)
	}
	for _, dev := range []string{matrixsim.SpineName(3), matrixsim.TorName(7)} {
		b.Run(dev, func(b *testing.B) {
			b.ReportAllocs()
			var cells []matrix.CellRef
			for b.Loop() {
				cells = m.Crossing(t0, dev)
			}
			if len(cells) == 0 {
				b.Fatalf("no cell crosses %s", dev)
			}
			b.ReportMetric(float64(len(cells)), "cells")
		})
	}
}
