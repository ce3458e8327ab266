package matrix

import "slices"

// Path repair: what build does to the traced paths once every pair is
// in. A host that does not trace adopts the access device traces reach
// it through; rack-mates get their ToR between them, or are unseen on a
// silent fabric; a flow into an overlay that heard nothing past its node
// is unseen; a trace that stopped at its target's access device is
// closed at the target (docs/localization.md, the traced-path model).

// adoptExits gives a host that does not trace (its agent is down, or the
// pulls die on the same broken NIC as its probes) the access device the
// traces reach it through. A host whose own traces met no device keeps
// none: other hosts' paths to it say nothing of what is in front of it.
func (r *round) adoptExits() {
	for d, acc := range r.devAcc {
		if acc == -1 && r.devExit[d] >= 0 && r.devHost[d] && !r.devLB[d] {
			r.devAcc[d] = r.devExit[d]
		}
	}
}

// bridgeRackMates puts the access device between two hosts behind it
// that a trace shows next to each other: a rack is one L2 segment
// switched by its ToR, which answers traces only as their router, so a
// trace to a rack-mate shows the rack-mate at the first hop. The probes
// and their replies still cross the ToR and both hosts' links to it; a
// ToR dropping packets drops these too, and left as a link of their own
// between the hosts, they made a lossy ToR read as lossy host pairs. The
// flow enters the fabric at that device, so its reply comes back
// through it. Hosts whose access device is unknown, or none (a flat
// network), keep their direct link.
func (r *round) bridgeRackMates() {
	r.via = resize(r.via, len(r.links))
	found := false
	for l, lk := range r.links {
		r.via[l] = -1
		x, y := lk.from, lk.to
		if !r.devHost[x] || !r.devHost[y] || r.devLB[x] || r.devLB[y] {
			continue
		}
		if a := r.devAcc[x]; a >= 0 && a == r.devAcc[y] && !r.devLB[a] {
			r.via[l], found = a, true
		}
	}
	if !found {
		return
	}
	r.rewriteLinks(func(f *rflow, old, links []int32) []int32 {
		for j, l := range old {
			a := r.via[l]
			if a < 0 {
				links = append(links, l)
				continue
			}
			lk := r.links[l]
			links = append(links, r.linkOf(lk.from, a), r.linkOf(a, lk.to))
			if j == 0 && lk.from == f.src && f.entry < 0 {
				f.entry = a
			}
		}
		return links
	})
}

// unseenRackMates: where the fabric is silent (some flow is unseen), a
// flow that runs straight from a host to another, neither of which ever
// met a device, is unseen too: their rack's L2 switch answers no trace,
// and left as a link between the hosts, what that ToR drops read as
// lossy hosts. On a flat network, with no silent flow, they keep it.
func (r *round) unseenRackMates() {
	if !slices.ContainsFunc(r.flows, func(f rflow) bool { return f.unseen }) {
		return
	}
	blind := func(d int32) bool { return r.isHost(d) && r.devAcc[d] < 0 }
	r.rewriteLinks(func(f *rflow, old, links []int32) []int32 {
		for _, l := range old {
			if lk := r.links[l]; blind(lk.from) && blind(lk.to) {
				f.unseen, f.complete, f.entry = true, false, -1
				return links
			}
		}
		return append(links, old...)
	})
}

// overlayTails: a flow into the overlay (to a pod of another node, from
// a node whose pods' flows ride one: tunnels) whose trace heard nothing
// past its source's node or that node's switch is unseen. Its packets
// went into the tunnel, whose path its trace cannot show: left with the
// links it has, a zone that lost its network put its pods' loss on their
// links to their nodes.
func (r *round) overlayTails() {
	if len(r.tunnels) == 0 {
		return
	}
	dark := func(f *rflow) bool {
		node, dn := r.nodeOf(f.src), r.nodeOf(f.dst)
		if f.complete || f.tail < 0 || !r.tunnels[node] || dn == f.dst || dn == node {
			return false
		}
		return f.tail == node || f.tail == r.switchOf(node)
	}
	r.rewriteLinks(func(f *rflow, old, links []int32) []int32 {
		if f.hopEnd > f.hopStart && dark(f) {
			f.unseen, f.entry = true, -1
			return links
		}
		return append(links, old...)
	})
}

// rewriteLinks rebuilds every flow's links: edit appends flow f's new
// ones, given its old ones, to links. The old lists' storage becomes the
// spare for the next rewrite.
func (r *round) rewriteLinks(edit func(f *rflow, old, links []int32) []int32) {
	links := r.spare[:0]
	for i := range r.flows {
		f := &r.flows[i]
		start := int32(len(links))
		links = edit(f, r.flowLinks[f.linkStart:f.linkEnd], links)
		f.linkStart, f.linkEnd = start, int32(len(links))
	}
	r.flowLinks, r.spare = links, r.flowLinks
}

// closeTails ends at its target each trace that stopped at the device
// every trace reaching that target comes through: its last answers were
// lost, most likely by the target's own link (a broken NIC eats the
// answers to the trace as it eats the probes). Left open, such a flow
// puts its loss on the links it shares with clean flows to the target's
// neighbours, and a host's fault reads as its ToR's or a spine's. A
// trace that stopped anywhere else keeps its gap: what lies in it is
// unknown. The flows' links are copied once, only when a tail closes.
func (r *round) closeTails() {
	closes := func(f *rflow) bool { return f.tail >= 0 && f.tail == r.devExit[f.dst] }
	found := false
	for i := range r.flows {
		if closes(&r.flows[i]) {
			found = true
			break
		}
	}
	if !found {
		return
	}
	r.rewriteLinks(func(f *rflow, old, links []int32) []int32 {
		links = append(links, old...)
		if closes(f) {
			if l := r.lookupLink(f.tail, f.dst); l >= 0 {
				links = append(links, l)
			}
		}
		return links
	})
}
