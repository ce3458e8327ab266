package matrix_test

import (
	"slices"
	"testing"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// TestTiesNamed: between two racks, a ToR's uplink to a spine and that
// spine's link down to the other ToR carry the same node flows, both
// ways (forward and reply). The data cannot tell them apart: both are
// listed at the same score, each naming the other in Evidence.Ties, so
// that a reader (or a test) knows naming either is as right as the data
// allows.
func TestTiesNamed(t *testing.T) {
	cfg := matrixsim.Config{Racks: 2, Spines: 2, NodesPerRack: 3, FlowsPerTarget: 8, ProbesPerFlow: 30, SilentHop: 0.2}
	fab, err := matrixsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(3) {
		ft := matrixsim.Fault{Kind: matrixsim.LinkLoss, Loss: 0.05, Rack: 1, Spine: 0, Up: true}
		kind, name := fab.Truth(ft)
		d := localize(t, fab, ft, seed, nil)
		l := d.Listed()
		if len(l) != 2 {
			t.Fatalf("seed %d: listed %+v, want %s %s and the link it ties with", seed, l, kind, name)
		}
		i := slices.IndexFunc(l, func(s matrix.Suspect) bool { return s.Kind == kind && s.Name == name })
		if i < 0 {
			t.Fatalf("seed %d: %s %s not listed: %+v", seed, kind, name, l)
		}
		right, other := l[i], l[1-i]
		if right.Score != other.Score {
			t.Errorf("seed %d: scores %.3f and %.3f, want a tie", seed, right.Score, other.Score)
		}
		if !slices.Equal(right.Evidence.Ties, []matrix.Ref{{Kind: other.Kind, Name: other.Name}}) ||
			!slices.Equal(other.Evidence.Ties, []matrix.Ref{{Kind: kind, Name: name}}) {
			t.Errorf("seed %d: ties %+v and %+v, want each naming the other (%s %s, %s %s)", seed, right.Evidence.Ties, other.Evidence.Ties, kind, name, other.Kind, other.Name)
		}
	}
}
