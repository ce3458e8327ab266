package matrixsim_test

import (
	"fmt"
	"strings"
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

// TestThreeTiers: between fabric pods a trace climbs its ToR, an
// aggregation switch of its pod, a super-spine and the other pod's
// aggregation switch, then the target's ToR; within a pod it stays below
// the super-spines. A lossy super-spine loses flows between pods only.
func TestThreeTiers(t *testing.T) {
	cfg := matrixsim.Config{Racks: 4, NodesPerRack: 2, Spines: 2, SuperSpines: 3, RacksPerPod: 2, LB: true, FlowsPerTarget: 8, ProbesPerFlow: 50}
	fab, err := matrixsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hops := fab.Hops()
	ft := matrixsim.Fault{Kind: matrixsim.SuperLoss, Super: 1, Loss: 0.5}
	var crossLost, podLost, cross, inPod uint64
	for _, o := range fab.Observations(ft, 1) {
		for _, tg := range o.Targets {
			if tg.Class != "node" || tg.Labels["rack"] == o.Agent.Labels["rack"] {
				continue
			}
			src, dst := rackOf(o.Agent.Labels["rack"]), rackOf(tg.Labels["rack"])
			for _, f := range tg.Protocols[0].Flows {
				var names []string
				for _, h := range f.Path.Hops[:len(f.Path.Hops)-1] {
					names = append(names, hops[h])
				}
				want := 3 // ToR, aggregation switch, ToR
				if src/2 != dst/2 {
					want = 5 // and a super-spine, the other pod's aggregation switch
					cross, crossLost = cross+f.Sent, crossLost+f.Lost
					if len(names) == want && (!strings.HasPrefix(names[1], fmt.Sprintf("agg%d-", src/2+1)) ||
						!strings.HasPrefix(names[2], "super") || !strings.HasPrefix(names[3], fmt.Sprintf("agg%d-", dst/2+1))) {
						t.Errorf("%s -> %s: hops %v: want ToR, agg of its pod, super-spine, agg of the other pod, ToR", o.Agent.Name, tg.Name, names)
					}
				} else {
					inPod, podLost = inPod+f.Sent, podLost+f.Lost
				}
				if len(names) != want {
					t.Errorf("%s -> %s: hops %v, want %d before the target", o.Agent.Name, tg.Name, names, want)
				}
			}
		}
	}
	if cross == 0 || inPod == 0 || crossLost == 0 || podLost != 0 {
		t.Errorf("super2 at 50%%: lost %d of %d between pods, %d of %d within; want some between, none within", crossLost, cross, podLost, inPod)
	}
	if _, err := matrixsim.New(matrixsim.Config{Racks: 4, NodesPerRack: 2, Spines: 2, SuperSpines: 3, FlowsPerTarget: 1, ProbesPerFlow: 1}); err == nil {
		t.Error("three tiers without racksPerPod: no error")
	}
}

// rackOf numbers a rack label ("rack3": 2).
func rackOf(label string) int { return int(label[len(label)-1] - '1') }

// TestSilentTruth: on a silent fabric the truth is the most specific
// statement the losing rack pairs allow: a fault above a fabric pod of
// one rack, or a super-spine between two pods one of which is a single
// rack, is that rack's uplinks; otherwise the tier.
func TestSilentTruth(t *testing.T) {
	for _, tc := range []struct {
		name        string
		racks, per  int
		ft          matrixsim.Fault
		kind, named string
	}{
		{"super-spine, pods {1,2} {3}", 3, 2, matrixsim.Fault{Kind: matrixsim.SuperLoss}, "tier", "uplinks of tor3"},
		{"super-spine, pods {1,2} {3,4}", 4, 2, matrixsim.Fault{Kind: matrixsim.SuperLoss}, "tier", "spine"},
		{"super-spine, pods {1} {2}", 2, 1, matrixsim.Fault{Kind: matrixsim.SuperLoss}, "tier", "spine"},
		{"agg of pod {5}", 5, 2, matrixsim.Fault{Kind: matrixsim.SpineLoss, Pod: 2}, "tier", "uplinks of tor5"},
		{"agg of pod {1,2}", 5, 2, matrixsim.Fault{Kind: matrixsim.SpineLoss, Pod: 0}, "tier", "spine"},
		{"super link of pod {5}", 5, 2, matrixsim.Fault{Kind: matrixsim.SuperLinkLoss, Pod: 2}, "tier", "uplinks of tor5"},
		{"super link of pod {1,2}, 3 pods", 5, 2, matrixsim.Fault{Kind: matrixsim.SuperLinkLoss, Pod: 0}, "tier", "spine"},
		{"super link of pod {1,2}, pods {1,2} {3}", 3, 2, matrixsim.Fault{Kind: matrixsim.SuperLinkLoss, Pod: 0}, "tier", "uplinks of tor3"},
		{"link", 5, 2, matrixsim.Fault{Kind: matrixsim.LinkLoss, Rack: 1}, "tier", "uplinks of tor2"},
	} {
		fab, err := matrixsim.New(matrixsim.Config{Racks: tc.racks, NodesPerRack: 2, Spines: 2, SuperSpines: 2, RacksPerPod: tc.per,
			FlowsPerTarget: 1, ProbesPerFlow: 1, SilentRouters: true, NoRackLabels: true})
		if err != nil {
			t.Fatal(err)
		}
		if kind, name := fab.Truth(tc.ft); kind != tc.kind || name != tc.named {
			t.Errorf("%s: truth %s %q, want %s %q", tc.name, kind, name, tc.kind, tc.named)
		}
	}
}
