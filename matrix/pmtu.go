package matrix

import (
	"fmt"
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
// the flows it explains. Flows whose traces show no link are left: no
// place can be named for them. A large probe that met a signalling
// smaller MTU is no loss (the agent counts it sent, not lost), so a
// working path MTU discovery names nothing.
func (p *pass) pmtuSuspects() []candidate {
	r := p.r
	type black struct {
		links      []int32
		sent, lost uint64
	}
	var blacks []black
	passes := map[int32]bool{} // links a large probe got across
	for pi := range r.pairs {
		pr := &r.pairs[pi]
		a := r.agents[pr.agent]
		t := &a.targets[pr.target]
		for _, proto := range a.protos[t.protoStart:t.protoEnd] {
			if proto.protocol != api.ProtocolTCPSYNMTU {
				continue
			}
			for _, big := range a.flows[proto.flowStart:proto.flowEnd] {
				small := pairFlow(r, pr, big.sourcePort)
				if small == nil || big.sent == 0 {
					continue
				}
				links := r.flowLinks[small.linkStart:small.linkEnd]
				switch {
				case big.lost < big.sent:
					for _, l := range links {
						passes[l] = true
					}
				case small.sent > 0 && 2*small.lost < small.sent && len(links) > 0:
					blacks = append(blacks, black{links: links, sent: big.sent, lost: big.lost})
				}
			}
		}
	}
	if len(blacks) == 0 {
		return nil
	}
	var out []candidate
	covered := make([]bool, len(blacks))
	for range maxPMTU {
		crossed := map[int32][]int{} // link -> the uncovered black flows across it
		for i, b := range blacks {
			if covered[i] {
				continue
			}
			for _, l := range b.links {
				if !passes[l] {
					crossed[l] = append(crossed[l], i)
				}
			}
		}
		best := int32(-1)
		for l, fs := range crossed {
			if best < 0 || len(fs) > len(crossed[best]) || len(fs) == len(crossed[best]) && l < best {
				best = l
			}
		}
		if best < 0 || len(crossed[best]) < 2 {
			break // one flow alone is not enough to name a place
		}
		lostThere := uint64(0)
		for _, i := range crossed[best] {
			lostThere += blacks[i].lost
		}
		if lostThere < minBlackProbes {
			break
		}
		group := []int32{best}
		for l, fs := range crossed {
			if l != best && slices.Equal(fs, crossed[best]) {
				group = append(group, l)
			}
		}
		slices.Sort(group)
		var sent, lost float64
		for _, i := range crossed[best] {
			covered[i] = true
			sent += float64(blacks[i].sent)
			lost += float64(blacks[i].lost)
		}
		for _, l := range group {
			c := candidate{dev: -1, conf: 1, excess: lost / float64(len(group)), links: []int32{l}}
			c.Kind, c.Name, c.EstimatedLoss = KindPMTU, r.linkName(l), 1
			lk := r.links[l]
			c.Addresses = append(slices.Clone(r.devAddr[lk.from]), r.devAddr[lk.to]...)
			detail := fmt.Sprintf("a path MTU black hole: %d flows across it lost every large probe while their small ones passed, and no flow whose large probes got through crosses it: it drops packets above its MTU and no \"fragmentation needed\" / \"packet too big\" reaches the sender", len(crossed[best]))
			var ties []Ref
			for _, o := range group {
				if o != l {
					ties = append(ties, Ref{Kind: KindPMTU, Name: r.linkName(o)})
				}
			}
			if len(ties) > 0 {
				detail += "; the data cannot tell it from the other links these flows cross alike"
			}
			c.Evidence = Evidence{Stage: "pmtu", Detail: detail, LossyFlows: len(crossed[best]),
				LostProbes: lost, SentProbes: sent, Ties: ties, Links: []string{c.Name}}
			out = append(out, c)
		}
	}
	return out
}

// pairFlow is the flow of pair pr from sourcePort that the round built
// (tcp_syn's: large probes' flows are not the round's), or nil.
func pairFlow(r *round, pr *pair, sourcePort uint16) *rflow {
	for fi := pr.flowStart; fi < pr.flowEnd; fi++ {
		if f := &r.flows[fi]; f.sourcePort == sourcePort && f.linkEnd > f.linkStart {
			return f
		}
	}
	return nil
}

// pmtuScores scores the black holes apart from the loss suspects: a
// packet size that never passes is not a share of random loss. The
// links named share what they explain of the black-holed flows.
func pmtuScores(cs []candidate) []Suspect {
	total := 0.0
	for _, c := range cs {
		total += c.excess
	}
	out := make([]Suspect, 0, len(cs))
	for _, c := range cs {
		s := c.Suspect
		s.Score = c.excess / total
		if s.Evidence.Examples == nil {
			s.Evidence.Examples = []FlowRef{}
		}
		out = append(out, s)
	}
	return out
}
