package hub

import (
	"slices"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// focusAt is the simulated round's time.
var focusAt = time.Unix(1700000000, 0)

// focusRound is one round of fab's reports under ft on a matrix grouped
// by rack.
func focusRound(t *testing.T, fab *matrixsim.Fabric, ft matrixsim.Fault, seed uint64) (*matrix.Matrix, matrix.Diagnosis) {
	t.Helper()
	m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops()})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range fab.Observations(ft, seed) {
		if err := m.Observe(focusAt, o); err != nil {
			t.Fatal(err)
		}
	}
	return m, m.Localize(focusAt)
}

// TestFocus: the page opens on the top suspect's path class and protocol,
// else on the worst cell.
func TestFocus(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 4, NodesPerRack: 3, Spines: 3, FlowsPerTarget: 4, ProbesPerFlow: 8, LB: true})
	if err != nil {
		t.Fatal(err)
	}
	m, d := focusRound(t, fab, matrixsim.Fault{Kind: matrixsim.SpineLoss, Spine: 0, Loss: 0.05}, 4)
	f := focusOf(m.Snapshot(focusAt), d)
	if f == nil || f.Path != api.PathNodeToNode || f.Protocol != api.ProtocolTCPSYN {
		t.Errorf("spine fault: focus %+v, want node_to_node tcp_syn", f)
	}
	m, d = focusRound(t, fab, matrixsim.Fault{Kind: matrixsim.LBLoss, Loss: 0.2}, 5)
	f = focusOf(m.Snapshot(focusAt), d)
	if f == nil || f.Path != api.PathNodeToLB {
		t.Errorf("lb fault (listed %+v): focus %+v, want node_to_lb", d.Listed(), f)
	}
	if f := focusOf(matrix.Snapshot{}, matrix.Diagnosis{}); f != nil {
		t.Errorf("no data: focus %+v, want none", f)
	}
	cells := []matrix.Cell{
		{Source: "a", Target: "b", Path: api.PathPodToPod, Protocol: api.ProtocolICMP, Sent: 100, Lost: 1, LossRatio: 0.01},
		{Source: "a", Target: "c", Path: api.PathNodeToNode, Protocol: api.ProtocolHTTP2Ping, Sent: 100, Lost: 9, LossRatio: 0.09},
	}
	f = focusOf(matrix.Snapshot{Groups: cells}, matrix.Diagnosis{})
	if f == nil || f.Path != api.PathNodeToNode || f.Protocol != api.ProtocolHTTP2Ping {
		t.Errorf("no suspect: focus %+v, want the worst cell's", f)
	}
	if !slices.ContainsFunc(cells, func(c matrix.Cell) bool { return c.Path == f.Path }) {
		t.Error("focus outside the cells")
	}
}
