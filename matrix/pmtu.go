package matrix

import (
	"fmt"
	"iter"
	"slices"

	"github.com/netprober/prober/api"
)

// minBlackProbes is how many large probes the black-holed flows across a
// link must have lost, all they sent, for it to be named: under the
// probe-rate cap of a large plan a flow sends one large probe a window,
// so the evidence is the link's, not a flow's. Random loss does not
// make one: the link must also pass no large probe.
const minBlackProbes = 3

// maxPMTU bounds the links pmtuSuspects names in one round.
const maxPMTU = 4

// pmtuSuspects names path MTU black holes: links that drop large packets
// in silence while small ones pass. A flow is black-holed when every
// large probe it sent (tcp_syn_mtu) was lost
// while most of its small ones (tcp_syn, the same 5-tuple and so the same
// ECMP path) were answered; its path is its small probes' trace. The link
// named is the one the most black-holed flows cross (at least two, and
// minBlackProbes of their large probes) and no flow whose large probes
// got through crosses: one large packet across a link clears it,
// whatever random loss it has. Links that black-holed flows
// cross exactly alike (the hops of one path beyond the culprit that no
// other flow takes) are tied. Up to maxPMTU links are named, each taking
// the flows it explains. When none is (a silent fabric's traces show
// only each host's own link, which large probes cross too), the
// black-holed flows go to unplacedPMTU. A large probe that met a signalling
// smaller MTU is no loss (the agent counts it sent, not lost), so a
// working path MTU discovery names nothing.
//
// It also returns the hosts (and pods) at either end of a black-holed
// flow: a hole takes a TLS connection's full-size segments in either
// direction, so those are the ones it may cut off.
func (p *pass) pmtuSuspects() (out []candidate, ends map[int32]bool) {
	r := p.r
	var blacks []black
	var loose []looseFlow
	ends = map[int32]bool{}
	passes := map[int32]bool{} // links a large probe got across
	for pi := range r.pairs {
		for big, fi := range largeFlows(r, pi) {
			small := &r.flows[fi]
			links := r.flowLinks[small.linkStart:small.linkEnd]
			switch {
			case big.lost < big.sent:
				for _, l := range links {
					passes[l] = true
				}
			case small.sent > 0 && 2*small.lost < small.sent:
				if len(links) > 0 {
					blacks = append(blacks, black{links: links, sent: big.sent, lost: big.lost})
				}
				loose = append(loose, looseFlow{pair: int32(pi), flow: fi, sent: big.sent, lost: big.lost})
				ends[r.pairs[pi].src], ends[r.pairs[pi].dst] = true, true
			}
		}
	}
	out = namedPMTU(r, blacks, passes)
	if len(out) == 0 {
		if c, ok := p.unplacedPMTU(loose); ok {
			out = append(out, c)
		}
	}
	return out, ends
}

// black is a black-holed flow whose trace shows links: every large
// probe lost, most small ones answered.
type black struct {
	links      []int32
	sent, lost uint64
}

// looseFlow is a black-holed flow, as unplacedPMTU reads it: its pair,
// its small flow in the round and its large probes.
type looseFlow struct {
	pair, flow int32
	sent, lost uint64
}

// namedPMTU names the links of pmtuSuspects' doc from the black-holed
// flows and the links large probes crossed.
func namedPMTU(r *round, blacks []black, passes map[int32]bool) []candidate {
	if len(blacks) == 0 {
		return nil
	}
	failed := make([][]int32, len(blacks))
	for i, b := range blacks {
		failed[i] = b.links
	}
	lostBy := func(flows []int) (sent, lost float64) {
		for _, i := range flows {
			sent += float64(blacks[i].sent)
			lost += float64(blacks[i].lost)
		}
		return sent, lost
	}
	picks := coverFlows(failed, func(l int32) bool { return passes[l] }, maxPMTU, func(flows []int, _ int) bool {
		_, lost := lostBy(flows)
		return lost >= minBlackProbes
	})
	var out []candidate
	for _, pk := range picks {
		sent, lost := lostBy(pk.flows)
		for _, l := range pk.elems {
			c := candidate{dev: -1, conf: 1, excess: lost / float64(len(pk.elems)), links: []int32{l}}
			c.Kind, c.Name, c.EstimatedLoss = KindPMTU, r.linkName(l), 1
			lk := r.links[l]
			c.Addresses = append(slices.Clone(r.devAddr[lk.from]), r.devAddr[lk.to]...)
			detail := fmt.Sprintf("a path MTU black hole: %d flows across it lost every large probe while their small ones passed, and no flow whose large probes got through crosses it: it drops packets above its MTU and no \"fragmentation needed\" / \"packet too big\" reaches the sender", len(pk.flows))
			var ties []Ref
			for _, o := range pk.elems {
				if o != l {
					ties = append(ties, Ref{Kind: KindPMTU, Name: r.linkName(o)})
				}
			}
			if len(ties) > 0 {
				detail += "; the data cannot tell it from the other links these flows cross alike"
			}
			c.Evidence = Evidence{Stage: "pmtu", Detail: detail, LossyFlows: len(pk.flows),
				LostProbes: lost, SentProbes: sent, Ties: ties, Links: []string{c.Name}}
			out = append(out, c)
		}
	}
	return out
}

// largeFlows yields pair pi's large-probe flows (tcp_syn_mtu) that sent,
// each with the index of its tcp_syn flow in the round (same 5-tuple).
func largeFlows(r *round, pi int) iter.Seq2[flowRec, int32] {
	return func(yield func(flowRec, int32) bool) {
		pr := &r.pairs[pi]
		a := r.agents[pr.agent]
		t := &a.targets[pr.target]
		for _, proto := range a.protos[t.protoStart:t.protoEnd] {
			if proto.protocol != api.ProtocolTCPSYNMTU {
				continue
			}
			for _, big := range a.flows[proto.flowStart:proto.flowEnd] {
				if fi := smallFlow(r, pr, big.sourcePort); fi >= 0 && big.sent > 0 && !yield(big, fi) {
					return
				}
			}
		}
	}
}

// smallFlow is the index in the round of pair pr's tcp_syn flow from
// sourcePort (large probes' flows are not the round's), or -1.
func smallFlow(r *round, pr *pair, sourcePort uint16) int32 {
	for fi := pr.flowStart; fi < pr.flowEnd; fi++ {
		if r.flows[fi].sourcePort == sourcePort {
			return fi
		}
	}
	return -1
}

// unplacedPMTU is the black hole of flows no traced hop places (a
// silent fabric, or flows not yet traced), named as the tier stage names
// a silent fabric's loss: the uplinks of the one rack every such flow
// enters (or else leaves), or the spine tier when they share none. It
// needs two flows and minBlackProbes lost large probes, all between
// racks, and the large probes of every flow alike (into that rack, out
// of it, or between racks) lost significantly more often than those
// flows' small ones: random loss takes both sizes alike, a black hole on
// one of N paths takes about one large probe in N and no small one.
func (p *pass) unplacedPMTU(loose []looseFlow) (candidate, bool) {
	r := p.r
	if len(loose) < 2 {
		return candidate{}, false
	}
	pairs := make([]int32, len(loose))
	for i, f := range loose {
		pairs[i] = f.pair
	}
	name, alike, match := p.unplacedSide(pairs)
	var lost, sent uint64
	var mine []looseFlow
	for _, f := range loose {
		if match(f.pair) {
			lost, sent = lost+f.lost, sent+f.sent
			mine = append(mine, f)
		}
	}
	if len(mine) < 2 || lost < minBlackProbes {
		return candidate{}, false
	}
	var bigSent, bigLost, smallSent, smallLost uint64
	for pi := range r.pairs {
		if !match(int32(pi)) {
			continue
		}
		for big, fi := range largeFlows(r, pi) {
			bigSent, bigLost = bigSent+big.sent, bigLost+min(big.lost, big.sent)
			smallSent, smallLost = smallSent+r.flows[fi].sent, smallLost+min(r.flows[fi].lost, r.flows[fi].sent)
		}
	}
	small := p.th.Healthy
	if smallSent > 0 {
		small = max(small, float64(smallLost)/float64(smallSent))
	}
	pv := upperTail(float64(bigLost), float64(bigSent), small)
	if bigSent == 0 || pv >= p.th.Alpha {
		return candidate{}, false
	}
	c := candidate{dev: -1, conf: 1, excess: float64(lost)}
	c.Kind, c.Name, c.Addresses, c.EstimatedLoss = KindPMTU, name, []string{}, 1
	c.Evidence = Evidence{Stage: "pmtu", Silent: true, LossyFlows: len(mine), LostProbes: float64(lost), SentProbes: float64(sent), PValue: pv,
		Detail: fmt.Sprintf("a path MTU black hole no traced hop places: %d flows %s lost every large probe while their small ones passed, and the large probes of all flows %s lose %.2g against %.2g of their small ones: packets above some MTU die in silence on a path there, no \"fragmentation needed\" / \"packet too big\" reaching the sender; the examples' 5-tuples tell the fabric's ECMP hash tool which path they take",
			len(mine), alike, alike, float64(bigLost)/float64(bigSent), float64(smallLost)/float64(max(smallSent, 1)))}
	slices.SortStableFunc(mine, func(x, y looseFlow) int { return cmpU64(y.lost, x.lost) })
	for _, f := range mine[:min(len(mine), maxTierFlows)] {
		ref := p.m.flowRef(r, f.flow)
		ref.Protocol, ref.Sent, ref.Lost = api.ProtocolTCPSYNMTU, f.sent, f.lost
		c.Evidence.Examples = append(c.Evidence.Examples, ref)
	}
	return c, true
}

// unplacedSide is where the flows of pairs lie when no traced hop places
// them, as the tier stage names a silent fabric's fault: the uplinks of
// the rack at least half of them (two at least) enter, or else leave,
// or else the spine tier; with the words for the flows alike and which
// pairs are such. Only pairs between two racks the tier stage tallied
// this round say where (an LB's flows cross the same uplinks to a VIP
// beyond them), and only they match.
func (p *pass) unplacedSide(pairs []int32) (name, alike string, match func(pi int32) bool) {
	rt := &p.m.loc.rt
	ends := func(pi int32) (src, dst string, ok bool) {
		q := rt.pairRack[pi]
		if q[0] < 0 || q[1] < 0 || q[0] == q[1] {
			return "", "", false
		}
		return rt.names[q[0]], rt.names[q[1]], true
	}
	type side struct {
		out  bool
		rack string
	}
	count := map[side]int{}
	placed := 0
	for _, pi := range pairs {
		if s, d, ok := ends(pi); ok {
			placed++
			count[side{false, d}]++
			count[side{true, s}]++
		}
	}
	var best side
	for sd, n := range count {
		if n > count[best] || n == count[best] && (!sd.out && best.out || sd.out == best.out && sd.rack < best.rack) {
			best = sd
		}
	}
	name, alike = "spine", "between racks"
	which := func(string, string) bool { return true }
	if n := count[best]; n >= 2 && 2*n >= placed {
		name = "uplinks of " + best.rack
		if best.out {
			alike, which = "out of "+best.rack, func(s, _ string) bool { return s == best.rack }
		} else {
			alike, which = "into "+best.rack, func(_, d string) bool { return d == best.rack }
		}
	}
	return name, alike, func(pi int32) bool {
		s, d, ok := ends(pi)
		return ok && which(s, d)
	}
}
