package plan

import (
	"fmt"
	"testing"
)

// agents returns n node agents, each with a pod agent on it, grouped by
// labels: "rack" (racks of 40), "zone" (3 zones) or "none" (one group).
func agents(n int, labels string, lbs int) []Peer {
	out := make([]Peer, 0, 2*n+lbs)
	for i := range n {
		group := ""
		switch labels {
		case "rack":
			group = fmt.Sprintf("rack%03d", i/40)
		case "zone":
			group = fmt.Sprintf("zone-%c", 'a'+i%3)
		}
		node := fmt.Sprintf("n%05d", i)
		out = append(out,
			Peer{Name: node, Class: "node", Group: group, Address: fmt.Sprintf("192.0.2.%d", i%256)},
			Peer{Name: "agent-" + node, Class: "pod", Group: group, Node: node, Address: fmt.Sprintf("198.51.100.%d", i%256)})
	}
	for l := range lbs {
		out = append(out, Peer{Name: fmt.Sprintf("vip%d", l), Class: "lb", Address: fmt.Sprintf("203.0.113.%d", l)})
	}
	return out
}

// coverage is what TestPlanCoverage checks of plans over a full rotation.
type coverage struct {
	neverProbed    int // agents no agent probes
	noForeign      int // agents no agent of another group probes, when there are other groups
	fewestProbers  int // fewest probers of its own group, over agents whose group has 4 or more of its class
	pairsUncovered int // ordered pairs of groups, node_to_node and pod_to_pod, with no probe
	mostTargets    int
	rounds         int
}

func measure(all []Peer, opts BuildOptions) coverage {
	idx := map[string]int{}
	var ags []Peer
	for _, p := range all {
		if p.Class != "lb" {
			idx[p.Name] = len(ags)
			ags = append(ags, p)
		}
	}
	groupSize := map[[2]string]int{} // class, group
	groups := map[string]int{}       // class: how many groups
	for _, p := range ags {
		k := [2]string{p.Class, p.Group}
		if groupSize[k] == 0 {
			groups[p.Class]++
		}
		groupSize[k]++
	}
	probers := make([]map[int]bool, len(ags))
	for i := range probers {
		probers[i] = map[int]bool{}
	}
	pairs := map[[3]string]bool{} // class, from group, to group
	c := coverage{fewestProbers: -1}
	first := Build(all, opts)
	c.rounds = first.RotationRounds
	for r := range c.rounds {
		opts.Round = r
		ps := Build(all, opts)
		for from, ts := range byAgent(ps) {
			c.mostTargets = max(c.mostTargets, len(ts))
			f := idx[from]
			for _, t := range ts {
				j, ok := idx[t.Name]
				if !ok {
					continue // lb
				}
				probers[j][f] = true
				if ags[f].Class == t.Class {
					pairs[[3]string{t.Class, ags[f].Group, t.Group}] = true
				}
			}
		}
	}
	for j, p := range ags {
		if len(probers[j]) == 0 {
			c.neverProbed++
		}
		own, foreign := 0, 0
		for f := range probers[j] {
			if ags[f].Group == p.Group {
				own++
			} else {
				foreign++
			}
		}
		if foreign == 0 && groups[p.Class] > 1 {
			c.noForeign++
		}
		if groupSize[[2]string{p.Class, p.Group}] >= 4 && (c.fewestProbers < 0 || own < c.fewestProbers) {
			c.fewestProbers = own
		}
	}
	for k := range groupSize {
		for l := range groupSize {
			if k[0] == l[0] && k[1] != l[1] && !pairs[[3]string{k[0], k[1], l[1]}] {
				c.pairsUncovered++
			}
		}
	}
	return c
}

// TestPlanCoverage prints the table docs/performance.md keeps: the
// whole-cluster plan's coverage at 100 to 10,000 nodes, each with a pod
// agent, and one LB, whatever the labels.
func TestPlanCoverage(t *testing.T) {
	t.Parallel()
	sizes := []int{100, 1000, 5000, 10000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	t.Logf("| nodes | labels | never probed | fewest probers | group pairs not covered | most targets | rotation rounds |")
	t.Logf("|---|---|---|---|---|---|---|")
	for _, n := range sizes {
		for _, labels := range []string{"rack", "zone", "none"} {
			c := measure(agents(n, labels, 1), BuildOptions{})
			t.Logf("| %d | %s | %d | %d | %d | %d | %d |", n, labels, c.neverProbed, c.fewestProbers,
				c.pairsUncovered, c.mostTargets, c.rounds)
			if c.neverProbed > 0 || c.noForeign > 0 || c.pairsUncovered > 0 || c.mostTargets > DefaultMaxTargets || c.fewestProbers < 3 {
				t.Errorf("%d nodes, labels %s: %+v", n, labels, c)
			}
		}
	}
}
