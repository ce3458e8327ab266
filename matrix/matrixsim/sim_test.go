package matrixsim_test

import (
	"testing"

	"github.com/netprober/prober/matrix/matrixsim"
)

// TestReplyPerProbe: drawing each reply's spine per probe spreads a lossy
// spine's reply loss over every flow instead of the flows whose replies
// hash to it, and leaves the loss itself as it was.
func TestReplyPerProbe(t *testing.T) {
	cfg := matrixsim.Config{Racks: 8, NodesPerRack: 4, Spines: 4, FlowsPerTarget: 4, ProbesPerFlow: 64}
	ft := matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.3, Spine: 1}
	count := func(perProbe bool) (clean, flows int, lost, sent uint64) {
		c := cfg
		c.ReplyPerProbe = perProbe
		fab, err := matrixsim.New(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range fab.Observations(ft, 1) {
			for _, tg := range o.Targets {
				if tg.Path != "node_to_node" {
					continue
				}
				for _, f := range tg.Protocols[0].Flows {
					flows++
					if f.Lost == 0 {
						clean++
					}
					lost, sent = lost+f.Lost, sent+f.Sent
				}
			}
		}
		return clean, flows, lost, sent
	}
	clean, flows, lost, sent := count(false)
	pclean, pflows, plost, psent := count(true)
	t.Logf("per flow: %d of %d flows clean, %d of %d lost; per probe: %d of %d clean, %d of %d lost", clean, flows, lost, sent, pclean, pflows, plost, psent)
	if flows == 0 || flows != pflows || sent != psent {
		t.Fatalf("flows %d and %d, probes %d and %d: want the same, not 0", flows, pflows, sent, psent)
	}
	if 2*pclean >= clean {
		t.Errorf("per probe, %d flows clean; per flow %d: replies drawn per probe must reach more flows", pclean, clean)
	}
	if r := float64(plost) / float64(lost); r < 0.8 || r > 1.25 {
		t.Errorf("per probe lost %d, per flow %d: the spine's loss must stay about the same", plost, lost)
	}
}
