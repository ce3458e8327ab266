package matrix

import (
	"fmt"
	"maps"
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

// latencyScratch is the latency stage's storage, reused round to round
// as the round's own is: a delaying spine at 5,000 nodes slows 750 k
// flows, whose elements cost 140 MB a round made afresh.
type latencyScratch struct {
	flat, scratch, ends, slowFlows []int32
	slow                           [][]int32
}

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
	someSlow := false
	for i := range r.flows {
		if f := &r.flows[i]; p.timed(f) && f.rtt >= slowAt {
			someSlow = true
			break
		}
	}
	if !someSlow {
		return nil // the healthy round's one pass
	}
	p.slowAt = slowAt
	// Elements are indexed, not hashed: a round with slow flows walks
	// every traced flow's (3 M at 5,000 nodes).
	ne := int(nl) + len(r.devName)
	cleared, seen := make([]bool, ne), make([]bool, ne)
	elements, fast := 0, 0
	ls := &p.m.loc.lat
	flat, scratch, ends, slowFlows := ls.flat[:0], ls.scratch[:0], ls.ends[:0], ls.slowFlows[:0]
	defer func() { ls.flat, ls.scratch, ls.ends, ls.slowFlows = flat, scratch, ends, slowFlows }()
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
	slow := resize(ls.slow, len(ends))
	ls.slow = slow
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
	if len(picks) == 0 {
		return p.unplacedLatency(floor, slowAt, fastBelow)
	}
	var out []candidate
	uncovered := len(slow)
	for _, pk := range picks {
		pv := pvalue(len(pk.flows), uncovered)
		uncovered -= len(pk.flows)
		mine := make([]int32, len(pk.flows))
		for k, i := range pk.flows {
			mine[k] = slowFlows[i]
		}
		added, examples := p.slowSummary(floor, mine)
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
			c.Evidence = Evidence{Stage: "latency", Detail: detail, LossyFlows: len(pk.flows), PValue: pv, Ties: ties, Examples: examples}
			out = append(out, c)
		}
	}
	return out
}

// slowEnds are the hosts at either end of the round's slow flows.
func (p *pass) slowEnds() map[int32]bool {
	ends := map[int32]bool{}
	if p.slowAt == 0 {
		return ends
	}
	for i := range p.r.flows {
		if f := &p.r.flows[i]; p.timed(f) && f.rtt >= p.slowAt {
			pr := &p.r.pairs[f.pair]
			ends[pr.src], ends[pr.dst] = true, true
		}
	}
	return ends
}

// latencyBackground is the share of flows taken to be slow by chance
// where none of the others is: a queue that filled for half a window.
const latencyBackground = 0.01

// unplacedLatency is the delay of slow flows no traced hop places (a
// silent fabric). First hosts: every flow to a host slow, four at
// least, and significantly more than the others (a binomial tail below
// Alpha against their share, latencyBackground at least) is the host's
// own link or stack, both ways. Then, named as unplacedPMTU names a black
// hole there, the uplinks of the rack most other slow flows enter or
// leave, or the spine tier, when the flows alike (between racks, into or
// out of that rack) are slow significantly more often than the others. A
// slow flow counts only when its source has a fast flow too: an agent
// whose every flow is slow times late itself (a busy node), and says
// nothing of a path.
func (p *pass) unplacedLatency(floor, slowAt, fastBelow uint16) []candidate {
	r := p.r
	hasFast := make([]bool, len(r.agents))
	for i := range r.flows {
		if f := &r.flows[i]; p.timed(f) && f.rtt < fastBelow {
			hasFast[r.pairs[f.pair].agent] = true
		}
	}
	counted := func(f *rflow) bool { return p.timed(f) && hasFast[r.pairs[f.pair].agent] }
	// significant tests the flows in: slow ones among all, against the
	// counted flows outside.
	significant := func(in func(f *rflow) bool) (sIn, nIn, base, pv float64) {
		var sOut, nOut float64
		for i := range r.flows {
			f := &r.flows[i]
			if !counted(f) {
				continue
			}
			slow := 0.0
			if f.rtt >= slowAt {
				slow = 1
			}
			if in(f) {
				sIn, nIn = sIn+slow, nIn+1
			} else {
				sOut, nOut = sOut+slow, nOut+1
			}
		}
		base = latencyBackground
		if nOut > 0 {
			base = max(base, sOut/nOut)
		}
		return sIn, nIn, base, upperTail(sIn, nIn, base)
	}
	var out []candidate
	named := map[int32]bool{} // hosts
	slowTo := map[int32][2]int{}
	for i := range r.flows {
		if f := &r.flows[i]; counted(f) {
			c := slowTo[f.dst]
			c[1]++
			if f.rtt >= slowAt {
				c[0]++
			}
			slowTo[f.dst] = c
		}
	}
	for _, d := range slices.Sorted(maps.Keys(slowTo)) {
		if c := slowTo[d]; c[0] < 4 || c[0] < c[1] || !r.isHost(d) || len(out) == maxLatency {
			continue
		}
		sIn, nIn, base, pv := significant(func(f *rflow) bool { return f.dst == d })
		if pv >= p.th.Alpha {
			continue
		}
		named[d] = true
		c := p.latencyCandidate(floor, slowAt, func(f *rflow) bool { return f.dst == d }, r.devName[d], sIn, pv)
		c.dev, c.Addresses = d, slices.Clone(r.devAddr[d])
		c.Evidence.Detail = fmt.Sprintf("adds about %.3g ms: all %.0f flows to it answer %g ms or more slower than the round's fastest flow, against %.2g of the others, and no traced hop places the delay elsewhere: its own link or stack delays both ways",
			c.AddedDelay*1e3, nIn, p.th.LatencyMs, base)
		out = append(out, c)
	}
	var pairs []int32
	for i := range r.flows {
		if f := &r.flows[i]; counted(f) && f.rtt >= slowAt && !named[f.dst] {
			pairs = append(pairs, f.pair)
		}
	}
	if len(pairs) < 2 || len(out) == maxLatency {
		return out
	}
	name, alike, match := p.unplacedSide(pairs)
	in := func(f *rflow) bool { return match(f.pair) && !named[f.dst] }
	sIn, nIn, base, pv := significant(in)
	if sIn < 2 || pv >= p.th.Alpha {
		return out
	}
	c := p.latencyCandidate(floor, slowAt, in, name, sIn, pv)
	c.Evidence.Silent = true
	c.Evidence.Detail = fmt.Sprintf("adds about %.3g ms on paths no traced hop shows: %.0f of %.0f flows %s answer %g ms or more slower than the round's fastest flow, against %.2g of the others: something there delays what it forwards; the examples' 5-tuples tell the fabric's ECMP hash tool which path they take",
		c.AddedDelay*1e3, sIn, nIn, alike, p.th.LatencyMs, base)
	return append(out, c)
}

// latencyCandidate is a latency suspect named for the slow counted
// flows in selects.
func (p *pass) latencyCandidate(floor, slowAt uint16, in func(f *rflow) bool, name string, slow, pv float64) candidate {
	r := p.r
	var mine []int32
	for i := range r.flows {
		if f := &r.flows[i]; p.timed(f) && f.rtt >= slowAt && in(f) {
			mine = append(mine, int32(i))
		}
	}
	c := candidate{dev: -1, conf: 1, excess: slow}
	c.Kind, c.Name, c.Addresses = KindLatency, name, []string{}
	var examples []FlowRef
	c.AddedDelay, examples = p.slowSummary(floor, mine)
	c.Evidence = Evidence{Stage: "latency", LossyFlows: int(slow), PValue: pv, Examples: examples}
	return c
}

// slowSummary is what a latency suspect says of its slow flows: the
// median of their round trips above floor, and the slowest as examples.
func (p *pass) slowSummary(floor uint16, flows []int32) (added float64, examples []FlowRef) {
	r := p.r
	excess := make([]float64, len(flows))
	for k, fi := range flows {
		excess[k] = float64(r.flows[fi].rtt-floor) * rttTick
	}
	slices.Sort(excess)
	if len(excess) > 0 {
		added = excess[len(excess)/2]
	}
	slowest := slices.Clone(flows)
	slices.SortStableFunc(slowest, func(a, b int32) int { return int(r.flows[b].rtt) - int(r.flows[a].rtt) })
	for _, fi := range slowest[:min(len(slowest), maxTierFlows)] {
		examples = append(examples, p.m.flowRef(r, fi))
	}
	return added, examples
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
