package matrix_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// clusterIP is the default/kubernetes Service's address in these tests.
const clusterIP = "192.0.2.1"

// TestServiceVIPNotFabric is the cluster kube-proxy makes: every agent
// probes the default/kubernetes ClusterIP, which its own node DNATs to
// the API server on the first node, so no device sits at the VIP; a
// trace to it ends with the ClusterIP answering. On a flat network (one
// L2 segment, no router) that is the trace's only hop, as the target is
// in a trace to another node. Measured on a real two-node cluster: with
// one node's NIC dropping, the VIP, being the first hop of traces,
// became the nodes' access device and was blamed as their ToR. A VIP is
// not the fabric, nor is a trace's target the fabric of that trace.
//
// Each case runs over several seeds, and with the targets in discovery
// order (the Service after the nodes) and with the Service first: the
// order of a report must not matter.
func TestServiceVIPNotFabric(t *testing.T) {
	t.Parallel()
	flat := func(nodes int) matrixsim.Config {
		return matrixsim.Config{Racks: 1, NodesPerRack: nodes, Spines: 1, Flat: true, ClusterIP: clusterIP,
			FlowsPerTarget: 8, ProbesPerFlow: 8, Background: 1e-4}
	}
	// Six racks, so that the ToR-spine links of one rack carry flows of
	// their own (with two or three the estimator cannot tell them apart).
	routed := matrixsim.Config{Racks: 6, NodesPerRack: 4, Spines: 2, ClusterIP: clusterIP,
		FlowsPerTarget: 8, ProbesPerFlow: 8, SilentHop: 0.05, Background: 1e-4}
	nic := func(node int) matrixsim.Fault { return matrixsim.Fault{Kind: matrixsim.HostNIC, Loss: 0.3, Node: node} }
	for _, tc := range []struct {
		name  string
		cfg   matrixsim.Config
		fault matrixsim.Fault
		seeds uint64
		// tie: the culprit may share the top score. Two nodes on one
		// segment lose the same probes whichever NIC is broken (the
		// Service's probes cannot tell either: their loss may lie past
		// the VIP, where no trace sees), so both are named, equally.
		tie bool
	}{
		{"flat 2 nodes, healthy", flat(2), matrixsim.Fault{Kind: matrixsim.Healthy}, 4, false},
		{"flat 2 nodes, worker's NIC", flat(2), nic(1), 8, true},
		{"flat 2 nodes, API server's NIC", flat(2), nic(0), 8, true},
		{"flat 3 nodes, healthy", flat(3), matrixsim.Fault{Kind: matrixsim.Healthy}, 4, false},
		{"flat 3 nodes, API server's NIC", flat(3), nic(0), 8, false},
		{"flat 3 nodes, worker's NIC", flat(3), nic(2), 8, false},
		{"routed, healthy", routed, matrixsim.Fault{Kind: matrixsim.Healthy}, 4, false},
		{"routed, spine", routed, matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.05, Spine: 1}, 20, false},
	} {
		for _, vipFirst := range []bool{false, true} {
			name := tc.name
			if vipFirst {
				name += ", VIP first"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fab, err := matrixsim.New(tc.cfg)
				must(t, err)
				kind, culprit := fab.Truth(tc.fault)
				for seed := range tc.seeds {
					obs := fab.Observations(tc.fault, seed)
					if vipFirst {
						for i := range obs {
							serviceFirst(&obs[i])
						}
					}
					m, err := matrix.New(matrix.Config{Hops: fab.Hops()})
					must(t, err)
					for _, o := range obs {
						must(t, m.Observe(t0, o))
					}
					d := m.Localize(t0)
					if kind == "" {
						if len(d.Suspects) > 0 {
							t.Errorf("seed %d, healthy: suspects %s, want none", seed, suspects(d))
						}
						continue
					}
					first := len(d.Suspects) > 0 && d.Suspects[0].Kind == kind && d.Suspects[0].Name == culprit
					if !first && tc.tie {
						i := slices.IndexFunc(d.Suspects, func(s matrix.Suspect) bool { return s.Kind == kind && s.Name == culprit })
						first = i > 0 && d.Suspects[i].Score >= d.Suspects[0].Score-1e-9
					}
					if !first {
						t.Errorf("seed %d: suspects %s, want %s/%s first", seed, suspects(d), kind, culprit)
						continue
					}
					for _, s := range d.Suspects {
						if namesVIP(s) {
							t.Errorf("seed %d: suspect %s names the Service's VIP, which is no device", seed, suspect(s))
						}
						if s.Kind == kind && s.Name == culprit || s.Score < matrix.ListScore {
							continue
						}
						if kind == matrix.KindHost && s.Kind == matrix.KindHost {
							continue // the peers the broken NIC shares its losses with
						}
						t.Errorf("seed %d: suspect %s beside %s/%s, want none scoring 0.1 or more", seed, suspect(s), kind, culprit)
					}
				}
			})
		}
	}
}

// serviceFirst moves the ClusterIP Service to the front of obs's targets.
func serviceFirst(obs *api.Observations) {
	i := slices.IndexFunc(obs.Targets, func(t api.Target) bool { return t.Name == matrixsim.ServiceName })
	if i > 0 {
		svc := obs.Targets[i]
		copy(obs.Targets[1:i+1], obs.Targets[:i])
		obs.Targets[0] = svc
	}
}

// namesVIP reports whether s names the Service or its address, alone or
// as a link end.
func namesVIP(s matrix.Suspect) bool {
	return strings.Contains(s.Name, matrixsim.ServiceName) || strings.Contains(s.Name, clusterIP) ||
		slices.Contains(s.Addresses, clusterIP)
}

func suspect(s matrix.Suspect) string {
	return fmt.Sprintf("[%s/%s %.2f, %s: %s]", s.Kind, s.Name, s.Score, s.Evidence.Stage, s.Evidence.Detail)
}

func suspects(d matrix.Diagnosis) string {
	var ss []string
	for _, s := range d.Suspects {
		ss = append(ss, suspect(s))
	}
	return strings.Join(ss, " ")
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
