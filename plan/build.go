package plan

import (
	"cmp"
	"github.com/netprober/prober/api"
	"slices"
	"strings"
)

// Defaults of BuildOptions.
const (
	DefaultMaxTargets = 256
	DefaultInGroup    = 8
)

// BuildOptions bound the whole-cluster plan.
type BuildOptions struct {
	// MaxTargets is the most targets one agent probes, LB targets
	// included; 0 means DefaultMaxTargets.
	MaxTargets int
	// InGroup is how many members of its own group an agent probes (and
	// so how many probe it) when the group is larger; 0 means
	// DefaultInGroup. Values under 3 are raised to 3.
	InGroup int
	// Round picks the round of the rotation of group pairs, taken modulo
	// Plans.RotationRounds: successive rounds cover different pairs.
	Round int
}

func (o BuildOptions) withDefaults() BuildOptions {
	if o.MaxTargets <= 0 {
		o.MaxTargets = DefaultMaxTargets
	}
	if o.InGroup <= 0 {
		o.InGroup = DefaultInGroup
	}
	o.InGroup = max(o.InGroup, 3)
	return o
}

// Plans is the probe plan of every agent for one round. It keeps each
// target as an index into one list of peers: at 10,000 nodes with a pod
// agent each, copies of Peer would take hundreds of MiB.
type Plans struct {
	// RotationRounds is how many rounds cover every pair of groups; 1
	// when one round fits them all in the budget.
	RotationRounds int
	// Round is the round these plans are for, in [0, RotationRounds).
	Round int

	peers   []Peer           // every peer, by name
	index   map[string]int32 // into peers
	targets [][]int32        // of peers[i], into peers; nil for an LB
}

// Agents returns the node and pod agents, by name.
func (p *Plans) Agents() []Peer {
	out := make([]Peer, 0, len(p.peers))
	for i, q := range p.peers {
		if q.Class != api.ClassLB && p.targets[i] != nil {
			out = append(out, q)
		}
	}
	return out
}

// Targets returns the targets of the named agent: LB targets first, then
// (pod agents) its node and its node's node targets, then its own
// group's members, then other groups'. Nil for an unknown agent.
func (p *Plans) Targets(agent string) []Peer {
	i, ok := p.index[agent]
	if !ok || p.targets[i] == nil {
		return nil
	}
	out := make([]Peer, len(p.targets[i]))
	for k, j := range p.targets[i] {
		out[k] = p.peers[j]
	}
	return out
}

// Build computes every agent's plan from the node agents (class "node"),
// pod agents (class "pod", with Node set), LB targets (class "lb") and
// the cluster DNS's endpoints (a DNS question set, any class). It is
// a pure function of the set of peers: any order, and duplicate names (the
// first after sorting counts), give the same Plans.
func Build(agents []Peer, opts BuildOptions) *Plans {
	opts = opts.withDefaults()
	peers := slices.Clone(agents)
	slices.SortFunc(peers, func(a, b Peer) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Class, b.Class),
			strings.Compare(a.Group, b.Group), strings.Compare(a.Address, b.Address),
			strings.Compare(a.Node, b.Node))
	})
	peers = slices.CompactFunc(peers, func(a, b Peer) bool { return a.Name == b.Name })
	var lbs, nodes, pods []Peer
	for _, p := range peers {
		switch {
		case p.Class == api.ClassLB || p.DNS != nil:
			// Every agent probes the LBs and the cluster DNS's
			// endpoints, which run no agent.
			lbs = append(lbs, p)
		case p.Class == api.ClassNode:
			nodes = append(nodes, p)
		case p.Class == api.ClassPod:
			pods = append(pods, p)
		}
	}
	lbs = lbs[:min(len(lbs), opts.MaxTargets)]
	// A pod agent probes its node, its node's node targets and its pod
	// targets: each layer gets half of what the LBs leave.
	budget := opts.MaxTargets - len(lbs)
	if len(pods) > 0 {
		budget = (budget - 1) / 2
	}
	budget = max(budget, 0)
	nl := newLayer(nodes, budget, opts.InGroup)
	pl := newLayer(pods, budget, opts.InGroup)
	rounds := max(nl.rounds, pl.rounds, 1)
	round := opts.Round % rounds
	if round < 0 {
		round += rounds
	}
	nodeTargets := nl.assign(round)
	podTargets := pl.assign(round)

	out := &Plans{RotationRounds: rounds, Round: round, peers: peers,
		index: make(map[string]int32, len(peers)), targets: make([][]int32, len(peers))}
	for i, p := range peers {
		out.index[p.Name] = int32(i)
	}
	global := func(p Peer) int32 { return out.index[p.Name] }
	lbIndex := make([]int32, len(lbs))
	for k, p := range lbs {
		lbIndex[k] = global(p)
	}
	nodeIndex := make(map[string]int, len(nodes))
	for i, p := range nl.peers {
		nodeIndex[p.Name] = i
		t := make([]int32, 0, len(lbs)+len(nodeTargets[i]))
		t = append(t, lbIndex...)
		for _, j := range nodeTargets[i] {
			t = append(t, global(nl.peers[j]))
		}
		out.targets[global(p)] = t[:min(len(t), opts.MaxTargets)]
	}
	for i, p := range pl.peers {
		n, onNode := nodeIndex[p.Node]
		size := len(lbs) + len(podTargets[i])
		if onNode {
			size += 1 + len(nodeTargets[n])
		}
		t := make([]int32, 0, size)
		t = append(t, lbIndex...)
		if onNode {
			t = append(t, global(nl.peers[n]))
			for _, j := range nodeTargets[n] {
				t = append(t, global(nl.peers[j]))
			}
		}
		for _, j := range podTargets[i] {
			t = append(t, global(pl.peers[j]))
		}
		// The layers' budgets keep this within the cap; cut anyway, for
		// budgets too small to hold a layer's ring.
		out.targets[global(p)] = t[:min(len(t), opts.MaxTargets)]
	}
	return out
}
