package matrix_test

import (
	"strings"
	"testing"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// TestOverlayTunnelsAreNodes: on a VXLAN overlay a pod's trace hears the
// other node from its tunnel address. Reported by that node's agent, the
// address is the node's: the fabric view has no device named by one, the
// tier above the ToRs holds the spines alone, and a lossy spine is named
// alone. Without the report the tunnel addresses were spine-tier devices.
func TestOverlayTunnelsAreNodes(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 3, NodesPerRack: 2, Spines: 3, Pods: true, Overlay: true,
		FlowsPerTarget: 8, ProbesPerFlow: 30, SilentHop: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	lossy := matrixsim.Fault{Kind: matrixsim.SpineLoss, Spine: 1, Loss: 0.05}
	kind, name := fab.Truth(lossy)
	run := func(obs []api.Observations) (matrix.Fabric, []matrix.Suspect) {
		m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops()})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range obs {
			if err := m.Observe(t0, o); err != nil {
				t.Fatal(err)
			}
		}
		l := m.Localize(t0).Listed()
		return m.Fabric(), l
	}
	tunnels := func(f matrix.Fabric) (n int) {
		for _, dv := range f.Devices {
			if strings.HasPrefix(dv.Name, "198.18.") && dv.Tier >= 2 {
				n++
			}
		}
		return n
	}
	f, l := run(fab.Observations(lossy, 1))
	if len(l) != 1 || l[0].Kind != kind || l[0].Name != name {
		t.Errorf("overlay, spine2 at 5%%: listed %v, want %s %s alone", brief(l), kind, name)
	}
	if n := tunnels(f); n != 0 {
		t.Errorf("%d tunnel addresses in the fabric's upper tiers, want none", n)
	}
	// The same reports without the nodes' host addresses: the test sees
	// the tunnels it guards against.
	obs := fab.Observations(lossy, 1)
	for i := range obs {
		obs[i].Agent.HostAddresses = nil
	}
	if f, _ := run(obs); tunnels(f) == 0 {
		t.Error("without host addresses no tunnel address was a fabric device: the check above cannot fail")
	}

	// A trace to another node's pod hears, after its own node, one hop:
	// the other node over the tunnel. Silent, that hop is still the
	// pod's node, never the source node's ToR (a link from a switch to a
	// pod, which took the loss of the flows through it).
	obs, silenced := fab.Observations(lossy, 1), 0
	for _, o := range obs {
		if o.Agent.Class != api.ClassPod {
			continue
		}
		for _, tg := range o.Targets {
			for _, p := range tg.Protocols {
				for _, fl := range p.Flows {
					if fl.Path != nil && len(fl.Path.Hops) == 3 && tg.Class == api.ClassPod {
						fl.Path.Hops[1] = ""
						silenced++
					}
				}
			}
		}
	}
	if silenced == 0 {
		t.Fatal("no pod's trace to another node's pod to silence")
	}
	f, l = run(obs)
	roles := map[string]string{}
	for _, dv := range f.Devices {
		roles[dv.Name] = dv.Role
	}
	for _, lk := range f.Links {
		if roles[lk.From] != matrix.RoleHost && roles[lk.To] == matrix.RolePod {
			t.Errorf("link %s->%s: a pod reached from a %s, not its node", lk.From, lk.To, roles[lk.From])
		}
	}
	if len(l) != 1 || l[0].Kind != kind || l[0].Name != name {
		t.Errorf("overlay, tunnel hops silent, spine2 at 5%%: listed %v, want %s %s alone", brief(l), kind, name)
	}
}
