package matrix_test

import (
	"testing"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// withEcho adds an icmp entry to every node target of obs: every echo
// lost, as a cluster whose nodes drop echo looks to an agent that counts
// it, or, with notAnswering, as prober's agents report it.
func withEcho(obs []api.Observations, notAnswering bool) []api.Observations {
	for i := range obs {
		for j := range obs[i].Targets {
			t := &obs[i].Targets[j]
			if t.Class != api.ClassNode {
				continue
			}
			p := api.Protocol{Protocol: api.ProtocolICMP, NotAnswering: notAnswering}
			if !notAnswering {
				p.Sent, p.Lost, p.LossRatio = 30, 30, 1
			}
			t.Protocols = append(t.Protocols, p)
		}
	}
	return obs
}

// TestEchoNotAnsweringIsNoData: on a cluster whose nodes drop ICMP echo
// (a host firewall, a security group), the agents' "not answering" is no
// data: a healthy fabric lists nothing and a lossy spine is named alone
// by tcp_syn, while the same echoes counted as lost raise a false alarm.
func TestEchoNotAnsweringIsNoData(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 4, NodesPerRack: 4, Spines: 3, FlowsPerTarget: 4, ProbesPerFlow: 8, SilentHop: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	healthy := matrixsim.Fault{Kind: matrixsim.Healthy}
	lossy := matrixsim.Fault{Kind: matrixsim.SpineLoss, Spine: 2, Loss: 0.05}
	if d := diagnose(t, fab.Hops(), withEcho(fab.Observations(healthy, 1), false)); len(d.Listed()) == 0 {
		t.Fatal("every echo counted as lost listed nothing: the test would not see the false alarm")
	}
	if d := diagnose(t, fab.Hops(), withEcho(fab.Observations(healthy, 1), true)); len(d.Suspects) != 0 {
		t.Errorf("healthy, echo not answering: suspects %v, want none", brief(d.Suspects))
	}
	kind, name := fab.Truth(lossy)
	d := diagnose(t, fab.Hops(), withEcho(fab.Observations(lossy, 2), true))
	if l := d.Listed(); len(l) != 1 || l[0].Kind != kind || l[0].Name != name {
		t.Errorf("lossy spine, echo not answering: listed %v, want %s %s alone", brief(l), kind, name)
	}

	m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops(), Cells: true})
	if err != nil {
		t.Fatal(err)
	}
	obs := withEcho(fab.Observations(healthy, 3), true)
	obs[0].Targets[0].Protocols[len(obs[0].Targets[0].Protocols)-1].Sent = 50 // a report that says both
	for _, o := range obs {
		if err := m.Observe(t0, o); err != nil {
			t.Fatal(err)
		}
	}
	var want, quiet, sent uint64
	for _, o := range obs {
		for _, t := range o.Targets {
			if t.Class == api.ClassNode {
				want++
			}
		}
	}
	for _, c := range m.Snapshot(t0).Groups {
		if c.Protocol == api.ProtocolICMP {
			quiet += c.NotAnswering
			sent += c.Sent
		}
	}
	if quiet != want || want == 0 || sent != 0 {
		t.Errorf("icmp groups: %d pairs not answering, %d probes, want %d and 0", quiet, sent, want)
	}
}
