package matrix_test

import (
	"strings"
	"testing"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// TestClusterDNS: every agent asks the cluster DNS at its VIP and at each
// CoreDNS endpoint (peers/dns.go). A healthy DNS lists nothing; one
// endpoint dropping a fifth of its UDP lookups is named alone, not the
// fabric nor the VIP, though half the VIP's flows reach it; the Service
// without endpoints is named as an LB (seed 002 on the DNS); a lossy
// spine is the spine, and the DNS paths through it are its evidence,
// never a DNS suspect beside it; a node whose pod forwarding loses is
// its dataplane, not the endpoint on it.
func TestClusterDNS(t *testing.T) {
	t.Parallel()
	base := matrixsim.Config{Racks: 6, NodesPerRack: 4, Spines: 2, FlowsPerTarget: 8, ProbesPerFlow: 8, LB: true, LBNoBackends: true,
		SilentHop: 0.05, Background: 1e-4, DNS: true}
	withPods := base
	withPods.Pods = true
	overlay := withPods
	overlay.Overlay = true
	silent := withPods
	silent.SilentRouters = true
	for _, fc := range []struct {
		name string
		cfg  matrixsim.Config
	}{{"nodes", base}, {"pods", withPods}, {"overlay", overlay}, {"silent", silent}} {
		for _, tc := range []struct {
			name  string
			fault matrixsim.Fault
		}{
			{"healthy", matrixsim.Fault{Kind: matrixsim.Healthy}},
			{"endpoint 1 drops UDP", matrixsim.Fault{Kind: matrixsim.DNSEndpointLoss, Loss: 0.2, Node: 0}},
			{"endpoint 2 drops UDP", matrixsim.Fault{Kind: matrixsim.DNSEndpointLoss, Loss: 0.2, Node: 1}},
			{"no endpoints", matrixsim.Fault{Kind: matrixsim.DNSNoEndpoints}},
			{"spine", matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.05, Spine: 1}},
			// The node the first endpoint runs on forwards its pods'
			// packets badly: its pod agent loses too, so it is the
			// dataplane, not the endpoint.
			{"dataplane under endpoint 1", matrixsim.Fault{Kind: matrixsim.Dataplane, Loss: 0.05, Rack: 0, Node: 0}},
		} {
			if tc.fault.Kind == matrixsim.Dataplane && !fc.cfg.Pods {
				continue // one pod on the node: the endpoint or its forwarding, nobody can tell
			}
			t.Run(fc.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				fab, err := matrixsim.New(fc.cfg)
				must(t, err)
				kind, culprit := fab.Truth(tc.fault)
				for seed := range uint64(6) {
					m, err := matrix.New(matrix.Config{Hops: fab.Hops()})
					must(t, err)
					for _, o := range fab.Observations(tc.fault, seed) {
						must(t, m.Observe(t0, o))
					}
					d := m.Localize(t0)
					var listed []matrix.Suspect
					for _, s := range d.Suspects {
						if s.Score >= matrix.ListScore {
							listed = append(listed, s)
						}
					}
					if kind == "" {
						if len(listed) > 0 {
							t.Errorf("seed %d, healthy: %s, want nothing listed", seed, suspects(d))
						}
						continue
					}
					if len(listed) == 0 || listed[0].Kind != kind || listed[0].Name != culprit {
						t.Errorf("seed %d: %s, want %s/%s first", seed, suspects(d), kind, culprit)
						continue
					}
					for _, s := range listed[1:] {
						t.Errorf("seed %d: %s listed beside %s/%s", seed, suspect(s), kind, culprit)
					}
					if tc.fault.Kind == matrixsim.SpineLoss {
						for _, s := range d.Suspects {
							if strings.Contains(s.Name, "kube-system/") {
								t.Errorf("seed %d: a lossy spine makes a DNS suspect %s", seed, suspect(s))
							}
						}
					}
				}
			})
		}
	}
}
