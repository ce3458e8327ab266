package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func cluster(nodes, perRack int, lbs int) []Peer {
	var all []Peer
	for n := range nodes {
		all = append(all, Peer{Name: fmt.Sprintf("n%05d", n), Class: "node", Group: fmt.Sprintf("rack%03d", n/perRack)})
	}
	for l := range lbs {
		all = append(all, Peer{Name: fmt.Sprintf("vip%d", l), Class: "lb"})
	}
	return all
}

func names(ps []Peer) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestPlanPingmesh(t *testing.T) {
	t.Parallel()
	all := cluster(12, 4, 1) // racks of 4: n0-3, n4-7, n8-11
	got := names(Plan(all[5], all, Options{}))
	want := []string{"vip0", "n00004", "n00006", "n00007", "n00009", "n00001"}
	if !slices.Equal(got, want) {
		t.Errorf("plan of n00005 = %v, want %v", got, want)
	}
	if got := names(Plan(all[5], all, Options{Cap: 4})); !slices.Equal(got, want[:4]) {
		t.Errorf("capped plan = %v, want %v", got, want[:4])
	}
}

func TestPlanIndependentOfOrder(t *testing.T) {
	t.Parallel()
	all := cluster(200, 40, 2)
	want := names(Plan(all[77], all, Options{Cap: 30}))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := slices.Clone(all)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, all[3]) // a duplicate
		if got := names(Plan(all[77], shuffled, Options{Cap: 30})); !slices.Equal(got, want) {
			t.Fatalf("plan depends on input order:\n%v\n%v", got, want)
		}
	}
}

func TestPlanSymmetric(t *testing.T) {
	t.Parallel()
	// With equal racks, a probes b iff b probes a: both directions of
	// every probed pair are measured, which the matrix uses to model
	// replies.
	all := cluster(120, 40, 0)
	probes := map[[2]string]bool{}
	for _, p := range all {
		for _, q := range Plan(p, all, Options{}) {
			probes[[2]string{p.Name, q.Name}] = true
		}
	}
	for k := range probes {
		if !probes[[2]string{k[1], k[0]}] {
			t.Fatalf("%s probes %s but not the reverse", k[0], k[1])
		}
	}
}

// TestPlanScale prints the numbers docs/performance.md quotes: probes per
// second per node and cluster-wide, and the matrix series they imply, at
// 100, 1,000 and 5,000 nodes in racks of 40 (100 nodes: 3 racks) with
// one LB, two protocols (icmp, tcp_syn) per target every 10 s.
func TestPlanScale(t *testing.T) {
	t.Parallel()
	const interval, protocols, perRack = 10.0, 2, 40
	for _, tc := range []struct {
		nodes, wantTargets int
	}{{100, 39 + 2 + 1}, {1000, 39 + 24 + 1}, {5000, 39 + 124 + 1}} {
		all := cluster(tc.nodes, perRack, 1)
		// Every node of a rack has as many targets as its first.
		most, total := 0, 0
		for first := 0; first < tc.nodes; first += perRack {
			n := len(Plan(all[first], all, Options{}))
			most = max(most, n)
			total += n * min(perRack, tc.nodes-first)
		}
		if most != tc.wantTargets {
			t.Errorf("%d nodes: %d targets per node, want %d", tc.nodes, most, tc.wantTargets)
		}
		racks := (tc.nodes + perRack - 1) / perRack
		perNode := float64(most*protocols) / interval
		rackSeries := racks * racks * protocols
		nodeSeries := tc.nodes * most * protocols
		t.Logf("| %d | %d | %d | %.1f | %.0f | %d | %d |", tc.nodes, racks, most, perNode,
			float64(total*protocols)/interval, rackSeries, nodeSeries)
	}
}
