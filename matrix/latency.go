package matrix

import (
	"fmt"
	"math"
	"slices"
)

// rttTick is the unit of a flow's median round trip in the round: 10 µs
// in a uint16 reaches 655 ms, far above any threshold a fabric needs,
// and keeps flowRec and rflow their size.
const rttTick = 10e-6

// rttTicks is seconds in rttTicks, saturating; 0 stays 0 (no answer).
func rttTicks(seconds float64) uint16 {
	s := clampSeconds(seconds)
	if s == 0 {
		return 0
	}
	return uint16(min(max(math.Round(s/rttTick), 1), math.MaxUint16))
}

// Latency's bounds: the answers a flow's median needs to say anything,
// the places named in one round, and the chance, over all the round's
// elements, that a place is named whose flows are slow no more often
// than the flows that avoid it.
const (
	minLatencyAnswers = 3
	maxLatency        = 4
	latencyAlpha      = 0.01
)

// latencySuspects names what adds delay: the same tomography as for a
// black hole, over each traced tcp_syn flow's median round trip. A flow
// is slow when its median is Thresholds.LatencyMs or more above the
// round's fastest flow, fast when less than half that above: a device
// or link that delays what it forwards slows every flow across it, and
// one fast flow across an element clears it. coverFlows takes the
// element the most slow flows cross and no fast one, and names it only
// when its flows are slow significantly more often than the flows that
// avoid it (a reply's path is not traced, so a reply through a slow
// spine slows a flow whose trace avoids it: by chance alone a few flows
// across an innocent link can all be slow). Flows to a VIP are left to
// the lb rule, and a flow with fewer than minLatencyAnswers answers
// says nothing.
func (p *pass) latencySuspects() []candidate {
	r := p.r
	floor := uint16(math.MaxUint16)
	for i := range r.flows {
		if f := &r.flows[i]; p.timed(f) {
			floor = min(floor, f.rtt)
		}
	}
	slowAt := floor + uint16(min(p.th.LatencyMs*1e-3/rttTick, math.MaxUint16-float64(floor)))
	fastBelow := floor + (slowAt-floor)/2
	nl := int32(len(r.links))
	any := false
	for i := range r.flows {
		if f := &r.flows[i]; p.timed(f) && f.rtt >= slowAt && f.linkEnd > f.linkStart {
			any = true
			break
		}
	}
	if !any {
		return nil // the healthy round's one pass
	}
	// Elements are indexed, not hashed: a round with slow flows walks
	// every traced flow's (3 M at 5,000 nodes).
	ne := int(nl) + len(r.devName)
	cleared, seen := make([]bool, ne), make([]bool, ne)
	elements, fast := 0, 0
	var flat, scratch []int32
	var ends, slowFlows []int32
	for i := range r.flows {
		f := &r.flows[i]
		if !p.timed(f) || f.linkEnd == f.linkStart {
			continue
		}
		scratch = flowElements(r, f, nl, scratch[:0])
		for _, e := range scratch {
			if !seen[e] {
				seen[e] = true
				elements++
			}
		}
		switch {
		case f.rtt >= slowAt:
			slices.Sort(scratch)
			flat = append(flat, slices.Compact(scratch)...)
			ends = append(ends, int32(len(flat)))
			slowFlows = append(slowFlows, int32(i))
		case f.rtt < fastBelow:
			fast++
			for _, e := range scratch {
				cleared[e] = true
			}
		}
	}
	slow := make([][]int32, len(ends))
	for k, end := range ends {
		start := int32(0)
		if k > 0 {
			start = ends[k-1]
		}
		slow[k] = flat[start:end]
	}
	pvalue := func(n, uncovered int) float64 {
		// The chance that n flows are all slow if they are slow as often as
		// the uncovered flows that avoid the element.
		others := uncovered - n
		if others == 0 {
			return 0
		}
		return math.Pow(float64(others)/float64(others+fast), float64(n))
	}
	picks := coverFlows(slow, func(e int32) bool { return cleared[e] }, maxLatency, func(flows []int, uncovered int) bool {
		return pvalue(len(flows), uncovered) < latencyAlpha/float64(elements)
	})
	var out []candidate
	uncovered := len(slow)
	for _, pk := range picks {
		pv := pvalue(len(pk.flows), uncovered)
		uncovered -= len(pk.flows)
		excess := make([]float64, len(pk.flows))
		for k, i := range pk.flows {
			excess[k] = float64(r.flows[slowFlows[i]].rtt-floor) * rttTick
		}
		slices.Sort(excess)
		added := excess[len(excess)/2]
		examples := slices.Clone(pk.flows)
		slices.SortStableFunc(examples, func(a, b int) int {
			return int(r.flows[slowFlows[b]].rtt) - int(r.flows[slowFlows[a]].rtt)
		})
		for _, e := range pk.elems {
			c := candidate{dev: -1, conf: 1, excess: float64(len(pk.flows)) / float64(len(pk.elems))}
			c.Kind, c.Name, c.AddedDelay = KindLatency, elementName(r, e, nl), added
			if e < nl {
				lk := r.links[e]
				c.links = []int32{e}
				c.Addresses = append(slices.Clone(r.devAddr[lk.from]), r.devAddr[lk.to]...)
			} else {
				c.dev = e - nl
				c.Addresses = slices.Clone(r.devAddr[c.dev])
			}
			if c.Addresses == nil {
				c.Addresses = []string{}
			}
			detail := fmt.Sprintf("adds about %.3g ms: %d flows across it answer %g ms or more slower than the round's fastest flow and none across it is fast, while the flows that avoid it are slow far less often (p = %.2g)",
				added*1e3, len(pk.flows), p.th.LatencyMs, pv)
			var ties []Ref
			for _, o := range pk.elems {
				if o != e {
					ties = append(ties, Ref{Kind: KindLatency, Name: elementName(r, o, nl)})
				}
			}
			if len(ties) > 0 {
				detail += "; the data cannot tell it from the others these flows cross alike"
			}
			c.Evidence = Evidence{Stage: "latency", Detail: detail, LossyFlows: len(pk.flows), PValue: pv, Ties: ties}
			for _, i := range examples[:min(len(examples), maxTierFlows)] {
				c.Evidence.Examples = append(c.Evidence.Examples, p.m.flowRef(r, slowFlows[i]))
			}
			out = append(out, c)
		}
	}
	return out
}

// timed reports whether a flow's median says anything: enough answers,
// and not to a VIP.
func (p *pass) timed(f *rflow) bool {
	return f.rtt > 0 && f.sent-f.lost >= minLatencyAnswers && !p.r.devLB[f.dst]
}

// flowElements appends to buf the links a flow crosses (ids below nl)
// and the devices at their ends (nl + device id), with the two links its
// reply certainly crosses: out of its target's first hop and into its
// source's; an element may repeat. A round trip is timed whole, so an
// agent whose own timing is late (a busy node) slows its flows alone,
// and flows to it clear its links, while a slow link of a host slows
// both.
func flowElements(r *round, f *rflow, nl int32, buf []int32) []int32 {
	links := r.flowLinks[f.linkStart:f.linkEnd]
	for _, l := range links {
		lk := r.links[l]
		buf = append(buf, l, nl+lk.from, nl+lk.to)
	}
	first, last := r.links[links[0]], r.links[links[len(links)-1]]
	for _, back := range [2]int32{r.lookupLink(first.to, first.from), r.lookupLink(last.to, last.from)} {
		if back >= 0 {
			buf = append(buf, back)
		}
	}
	return buf
}

// elementName is a link's "from->to" or a device's name.
func elementName(r *round, e, nl int32) string {
	if e < nl {
		return r.linkName(e)
	}
	return r.devName[e-nl]
}

// shareScores scores suspects that judge flows whole (black holes, added
// delay) apart from the loss suspects: each takes its share of what
// they explain together.
func shareScores(cs []candidate) []Suspect {
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
