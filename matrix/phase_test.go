package matrix_test

import (
	"os"
	"testing"
	"time"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

func TestPhases(t *testing.T) {
	if os.Getenv("PHASES") == "" {
		t.Skip()
	}
	cfg := matrixsim.Config{Racks: 125, NodesPerRack: 40, Spines: 8, LB: true, FlowsPerTarget: 4, ProbesPerFlow: 2, SilentHop: 0.05, Background: 1e-4}
	fab, _ := matrixsim.New(cfg)
	for _, k := range []matrixsim.Kind{matrixsim.LinkLoss, matrixsim.Blackhole} {
		obs := fab.Observations(matrixsim.Fault{Kind: k, Loss: 0.02, Rack: 7, Spine: 3}, 1)
		m, _ := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops()})
		for range 3 {
			a := time.Now()
			for _, o := range obs {
				m.Observe(t0, o)
			}
			b := time.Now()
			d := m.Localize(t0)
			t.Logf("%s: observe %v localize %v suspects %d", k, b.Sub(a), time.Since(b), len(d.Suspects))
		}
	}
}
