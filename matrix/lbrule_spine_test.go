package matrix

import (
	"testing"

	"github.com/netprober/prober/matrix/matrixsim"
)

// TestLossySpineIsNoLB: a VIP behind the spines loses what a lossy spine
// drops; compared with its clients' rack-local paths it looked like a
// lossy LB (the real cluster named the API server's LB at 0.40 beside
// spine1). Early in the fault's window too: few probes.
func TestLossySpineIsNoLB(t *testing.T) {
	t.Parallel()
	for _, probes := range []int{10, 60} {
		cfg := clusterShape
		cfg.ProbesPerFlow = probes
		cfg.LBNoBackends = true
		fab, err := matrixsim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(64) {
			m, err := New(Config{GroupBy: "node", Hops: fab.Hops()})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range fab.Observations(matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.05, Spine: int(seed % 2)}, seed) {
				if err := m.Observe(t0, o); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range m.Localize(t0).Suspects {
				if s.Kind == KindLB && s.Score >= alarming {
					t.Errorf("%d probes a flow, seed %d: %s %s %.2f: %s", probes, seed, s.Kind, s.Name, s.Score, s.Evidence.Detail)
				}
			}
		}
	}
}
