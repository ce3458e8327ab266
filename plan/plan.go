package plan

import (
	"cmp"
	"slices"
	"strings"
)

// Peer is one probe target candidate.
type Peer struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Class   string `json:"class"` // node | pod | lb
	// Group is the peer's rack (or another locality label); peers
	// without one form one group.
	Group string `json:"group"`
	// Node is the node a pod agent runs on: Build gives a pod agent its
	// node and the nodes its node probes (pod_to_node).
	Node string `json:"node,omitempty"`
}

// Options bound the plan.
type Options struct {
	// Cap is the most targets one agent probes; 0 means no cap. LB
	// targets come first, then the agent's own rack, then other racks
	// (starting after its own, so that agents of different racks keep
	// different ones when capped).
	Cap int
}

// Plan returns the peers self probes, in a stable order. Duplicate names
// in all count once (the first after sorting).
func Plan(self Peer, all []Peer, opts Options) []Peer {
	peers := slices.Clone(all)
	slices.SortFunc(peers, func(a, b Peer) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Name, b.Name),
			strings.Compare(a.Address, b.Address), strings.Compare(a.Class, b.Class))
	})
	peers = slices.CompactFunc(peers, func(a, b Peer) bool { return a.Name == b.Name })
	var lbs []Peer
	racks := map[string][]Peer{}
	var groups []string
	for _, p := range peers {
		if p.Class == "lb" {
			lbs = append(lbs, p)
			continue
		}
		if _, ok := racks[p.Group]; !ok {
			groups = append(groups, p.Group)
		}
		racks[p.Group] = append(racks[p.Group], p)
	}
	slices.SortFunc(lbs, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	own := racks[self.Group]
	i := slices.IndexFunc(own, func(p Peer) bool { return p.Name == self.Name })
	if i < 0 { // self not in the list: where it would sort
		i, _ = slices.BinarySearchFunc(own, self.Name, func(p Peer, n string) int { return strings.Compare(p.Name, n) })
	}
	out := slices.Clone(lbs)
	for _, p := range own {
		if p.Name != self.Name {
			out = append(out, p)
		}
	}
	start, _ := slices.BinarySearch(groups, self.Group)
	for k := 1; k <= len(groups); k++ {
		g := groups[(start+k)%len(groups)]
		if g == self.Group {
			continue
		}
		members := racks[g]
		out = append(out, members[i%len(members)])
	}
	if opts.Cap > 0 && len(out) > opts.Cap {
		out = out[:opts.Cap]
	}
	return out
}
