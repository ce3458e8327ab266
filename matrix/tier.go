package matrix

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/netprober/prober/api"
)

// tierSuspects is Pingmesh's rule, refined by where the loss falls, over
// every pair, traced or not: it stands where traces name nothing (a
// silent fabric, tracing off) and confirms what they name elsewhere.
// Pairs are tallied by the racks of their ends (rackOf; hosts of no known
// rack, pairs to excluded hosts, LB paths and pairs within one node are
// left out). A ToR's or uplinks' loss must be spread: no host holds
// more than 3/4 of it; the tier's must be significant without its worst
// rack. One broken host is never a ToR or a tier:
//
//   - Only its ToR lies between rack-mates: a rack whose in-rack pairs
//     lose while the other racks' do not is its ToR.
//   - Cross-rack loss that falls on one rack's pairs alone (those in and
//     out of it clearly worse than all others, its in-rack pairs clean)
//     is the links between its ToR and the tier above: its uplinks.
//   - Cross-rack loss spread over the racks is the tier above the ToRs,
//     which the matrix alone cannot narrow to a device: traced paths can.
//
// A tier's candidate keeps the cross-rack pairs behind it (pairs), for
// tierFlows to say which of their flows lose.
func tierSuspects(r *round, rt *rackTallies, th *Thresholds, rackOf func(int32) string, excluded map[int32]bool) []candidate {
	rt.tally(r, th, rackOf, excluded)
	if len(rt.names) == 0 {
		return nil
	}
	var out []candidate
	tors := make([]bool, len(rt.names))
	var sickIn []int
	var cleanIn tally
	for q := range rt.names {
		if th.isSignificant(rt.in[q]) {
			sickIn = append(sickIn, q)
		} else {
			cleanIn.sent += rt.in[q].sent
			cleanIn.lost += rt.in[q].lost
		}
	}
	// Every rack losing within itself is no set of ToRs but something
	// they share: left to the cross-rack rules below.
	everyIn := len(sickIn) >= 2 && cleanIn.sent == 0
	if !everyIn && !th.isSignificant(cleanIn) {
		for _, q := range sickIn {
			inQ := func(sq, dq int) bool { return sq == q && dq == q }
			if rt.spreadOverHosts(r, inQ) {
				tors[q] = true
				out = append(out, rt.tor(r, th, q, fmt.Sprintf("the paths within it lose %.2g, the other racks' %.2g: its ToR", rt.in[q].ratio(), cleanIn.ratio())))
			}
		}
	}

	var all tally
	var allF flowTally
	touch := make([]tally, len(rt.names))
	touchF := make([]flowTally, len(rt.names))
	pairs := rt.cross[:0]
	defer func() { rt.cross = pairs[:0] }() // its storage, for the next round
	for pi := range r.pairs {
		sq, dq := rt.racks(pi)
		if sq < 0 || sq == dq || tors[sq] || tors[dq] {
			continue
		}
		p := &r.pairs[pi]
		all.add(p)
		touch[sq].add(p)
		touch[dq].add(p)
		allF.add(rt.pairFlows[pi])
		touchF[sq].add(rt.pairFlows[pi])
		touchF[dq].add(rt.pairFlows[pi])
		pairs = append(pairs, int32(pi))
	}
	// By probes, or by sick flows where ECMP dilutes a bad link's loss.
	// Each rack is tested even when the whole is not significant: one of
	// the many links out of a fabric pod of one rack makes a few dozen
	// sick flows, lost among every rack's.
	var one []int
	for q := range rt.names {
		rest := tally{sent: all.sent - touch[q].sent, lost: all.lost - touch[q].lost}
		restF := allF.minus(touchF[q])
		if tors[q] || rest.sent == 0 {
			continue
		}
		// Significantly worse than the rest's rate, which a fabric's
		// background keeps near Healthy at scale: a fixed ratio
		// (clearlyWorse's five times) missed a rack's lossy uplink.
		byProbes := th.isSignificant(touch[q]) && !th.isSignificant(rest) && upperTail(float64(touch[q].lost), float64(touch[q].sent), max(rest.ratio(), th.Healthy)) < th.Alpha
		restSick, _ := th.sickFlows(restF, 0)
		qSick, _ := th.sickFlows(touchF[q], restF.ratio())
		if byProbes || qSick && !restSick {
			one = append(one, q)
		}
	}
	crossQ := func(q int) func(sq, dq int) bool {
		return func(sq, dq int) bool { return sq != dq && (sq == q || dq == q) && !tors[sq] && !tors[dq] }
	}
	if len(one) == 1 {
		q := one[0]
		if !rt.spreadOverHosts(r, crossQ(q)) {
			return out
		}
		if rt.in[q].sent == 0 {
			// No rack-mates to clear the ToR itself.
			return append(out, rt.tor(r, th, q, fmt.Sprintf("the paths in and out of it lose %.2g, the others %.2g, and no rack-mates tell its ToR from its uplinks", touch[q].ratio(), tally{sent: all.sent - touch[q].sent, lost: all.lost - touch[q].lost}.ratio())))
		}
		if th.isSignificant(rt.in[q]) {
			// Its rack-mates lose too, though too few hosts to rule out
			// one (a rack of two): with the paths out of it spread over
			// its hosts, what lies under both is its ToR.
			return append(out, rt.tor(r, th, q, fmt.Sprintf("the paths in and out of it lose %.2g, the others %.2g, and the paths within it %.2g: its ToR", touch[q].ratio(), tally{sent: all.sent - touch[q].sent, lost: all.lost - touch[q].lost}.ratio(), rt.in[q].ratio())))
		}
		// A round trip in or out of the rack crosses its uplinks both
		// ways, so a fault in them makes the pairs its agents report
		// (out) and those others report into it (in) lose alike. One
		// side far cleaner is the word of the agents on the other:
		// agents in the rack claiming loss on their own flows alone.
		var in, outs tally
		for pi := range r.pairs {
			if sq, dq := rt.racks(pi); sq >= 0 && crossQ(q)(sq, dq) {
				if sq == q {
					outs.add(&r.pairs[pi])
				} else {
					in.add(&r.pairs[pi])
				}
			}
		}
		if lossy, ok := lopsided(th, in, outs); ok {
			rt.disputes = append(rt.disputes, rt.sides(r, th, q, crossQ(q), lossy))
			return out
		}
		c := rt.tier(th, "uplinks of "+rt.names[q], touch[q], fmt.Sprintf("the paths in and out of %s lose, its in-rack paths and the other racks' paths do not: the links between its ToR and the tier above", rt.names[q]))
		bySickFlows(th, &c, touch[q], touchF[q])
		c.pairs = slices.DeleteFunc(pairs, func(pi int32) bool {
			sq, dq := rt.racks(int(pi))
			return sq != q && dq != q
		})
		return append(out, c)
	}
	// Spread: the cross-rack pairs that do not touch the worst rack lose
	// too.
	worst, n := -1, 0
	for q := range rt.names {
		if tors[q] || touch[q].sent == 0 {
			continue
		}
		n++
		if worst < 0 || touch[q].lost > touch[worst].lost {
			worst = q
		}
	}
	if n < 2 {
		return out
	}
	// The tier's own loss is what its pairs lose beyond the in-rack
	// pairs (the same hosts, ToRs and pod links): a cross-rack round trip
	// crosses twice the elements, each at a healthy background.
	base := cleanIn.ratio()
	beyondIn := func(t tally) bool {
		return th.isSignificant(t) && upperTail(float64(t.lost), float64(t.sent), min(1, base+th.Healthy)) < th.Alpha
	}
	if sick, _ := th.sickFlows(allF, 0); !beyondIn(all) && !sick {
		return out
	}
	rest := tally{sent: all.sent - touch[worst].sent, lost: all.lost - touch[worst].lost}
	if restSick, _ := th.sickFlows(allF.minus(touchF[worst]), 0); n > 2 && !beyondIn(rest) && !restSick {
		return out
	}
	within := "not within their own"
	if everyIn {
		within = "and within their own"
	}
	c := rt.tier(th, "spine", all, fmt.Sprintf("the paths between all %d racks lose, %s: the tier above the ToRs", n, within))
	bySickFlows(th, &c, all, allF)
	c.Addresses = upperTier(r)
	if len(c.Addresses) == 0 {
		for q := range rt.names {
			if !tors[q] && touch[q].sent > 0 {
				c.Addresses = append(c.Addresses, rt.names[q])
			}
		}
	}
	c.pairs = pairs
	return append(out, c)
}

// rackTallies are the pairs tallied by the racks of their ends.
type rackTallies struct {
	names []string
	// pairRack is each pair's source and target rack (indexes into
	// names), -1 where unknown or the pair is left out.
	pairRack [][2]int32
	in       []tally // pairs within the rack
	// pairFlows is each pair's flows and sick flows (flowTally).
	pairFlows []flowTally
	limits    sickLimits
	cross     []int32 // tierSuspects' scratch: the cross-rack pairs
	// disputes are the racks' uplinks the sources refused this round.
	disputes []disputed
}

// flowTally counts flows, and those of them that are sick, with the
// probes the sick ones sent and lost, and null: how many would be sick
// were every element no worse than Healthy.
type flowTally struct {
	flows, sick uint64
	null        float64
	sickProbes  tally
}

func (t *flowTally) add(o flowTally) {
	t.flows += o.flows
	t.sick += o.sick
	t.null += o.null
	t.sickProbes.sent += o.sickProbes.sent
	t.sickProbes.lost += o.sickProbes.lost
}

// count adds n flows that each sent and lost so many probes.
func (t *flowTally) count(l *sickLimits, sent, lost, n uint64) {
	k, null := l.of(sent)
	t.flows += n
	t.null += null * float64(n)
	if k > 0 && lost >= k {
		t.sick += n
		t.sickProbes.sent += sent * n
		t.sickProbes.lost += lost * n
	}
}

func (t flowTally) minus(o flowTally) flowTally {
	return flowTally{flows: t.flows - o.flows, sick: t.sick - o.sick, null: t.null - o.null,
		sickProbes: tally{sent: t.sickProbes.sent - o.sickProbes.sent, lost: t.sickProbes.lost - o.sickProbes.lost}}
}

// flowSickP is how unlikely a flow's own loss must be at the Healthy rate
// for it to be sick: on ECMP one bad link of many spines' carries a few
// flows at its full rate, which a probe total dilutes below Healthy and
// a count of sick flows does not.
const flowSickP = 0.01

// sickLimit is, for a flow of sent probes, the fewest lost that make it
// sick, and the chance of as many at the Healthy rate h: the binomial
// tail, summed exactly while the limit is small, else its Chernoff bound
// (more than the exact tail: a null that errs high names less); 0, 0
// when no count does. upperTail falls as the count rises, so the limit
// is found by bisection: a report may claim 2^40 probes of one flow.
func sickLimit(sent uint64, h float64) (k uint64, p float64) {
	n := float64(sent)
	if sent == 0 || upperTail(n, n, h) >= flowSickP {
		return 0, 0
	}
	lo, hi := uint64(1), sent // the limit is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		if upperTail(float64(mid), n, h) < flowSickP {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	k = lo
	if k > maxExactSick {
		return k, upperTail(float64(k), n, h)
	}
	// P(X >= k) = 1 - sum_{i<k} C(n,i) h^i (1-h)^(n-i), term by term.
	term := math.Exp(n * math.Log1p(-h))
	below := 0.0
	for i := uint64(0); i < k; i++ {
		below += term
		term *= (n - float64(i)) / float64(i+1) * h / (1 - h)
	}
	return k, max(0, 1-below)
}

// maxExactSick bounds the terms sickLimit sums exactly.
const maxExactSick = 64

// sickLimits caches sickLimit by sent: a round asks it for every flow,
// and a window's flows send a few dozen different counts.
type sickLimits struct {
	h     float64
	cache []sickLimitOf // by sent, up to maxCachedSent
}

type sickLimitOf struct {
	k    uint64
	null float64
	ok   bool
}

const maxCachedSent = 1 << 14

func (l *sickLimits) of(sent uint64) (uint64, float64) {
	if sent >= maxCachedSent {
		return sickLimit(sent, l.h)
	}
	if int(sent) >= len(l.cache) {
		l.cache = append(l.cache, make([]sickLimitOf, int(sent)+1-len(l.cache))...)
	}
	c := &l.cache[sent]
	if !c.ok {
		c.k, c.null = sickLimit(sent, l.h)
		c.ok = true
	}
	return c.k, c.null
}

// sickFlows reports whether more of t's flows are sick than their null
// count, or a share base of them, explains at Alpha, with the p-value.
func (th *Thresholds) sickFlows(t flowTally, base float64) (bool, float64) {
	if t.flows == 0 {
		return false, 1
	}
	pv := upperTail(float64(t.sick), float64(t.flows), max(base, t.null/float64(t.flows), 1e-12))
	return t.sick > 0 && pv < th.Alpha, pv
}

func (t flowTally) ratio() float64 {
	if t.flows == 0 {
		return 0
	}
	return float64(t.sick) / float64(t.flows)
}

// racks are pair pi's source and target racks, -1 when left out.
func (rt *rackTallies) racks(pi int) (int, int) {
	k := rt.pairRack[pi]
	return int(k[0]), int(k[1])
}

// tally fills rt from r's pairs, reusing its storage: a round at 5,000
// nodes has some 800,000 pairs.
func (rt *rackTallies) tally(r *round, th *Thresholds, rackOf func(int32) string, excluded map[int32]bool) {
	rt.names, rt.disputes = rt.names[:0], nil
	rt.pairRack = resize(rt.pairRack, len(r.pairs))
	idx := map[string]int32{}
	rackIdx := func(d int32) int32 {
		name := rackOf(d)
		if name == "" {
			// Nothing says which hosts share a ToR, and lumping them
			// into one nameless rack would blame a ToR that may not
			// exist.
			return -1
		}
		q, ok := idx[name]
		if !ok {
			q = int32(len(rt.names))
			idx[name] = q
			rt.names = append(rt.names, name)
		}
		return q
	}
	for pi := range r.pairs {
		p := &r.pairs[pi]
		rt.pairRack[pi] = [2]int32{-1, -1}
		t := &r.agents[p.agent].targets[p.target]
		if excluded[p.dst] || excluded[p.src] || isLBPath(t) || r.sameNode(p) {
			continue
		}
		sq, dq := rackIdx(p.src), rackIdx(p.dst)
		if sq < 0 || dq < 0 {
			continue
		}
		rt.pairRack[pi] = [2]int32{sq, dq}
	}
	rt.in = resize(rt.in, len(rt.names))
	clear(rt.in)
	rt.pairFlows = resize(rt.pairFlows, len(r.pairs))
	clear(rt.pairFlows)
	if rt.limits.h != th.Healthy {
		rt.limits = sickLimits{h: th.Healthy}
	}
	for pi := range r.pairs {
		q := rt.pairRack[pi]
		if q[0] < 0 {
			continue
		}
		if q[0] == q[1] {
			rt.in[q[0]].add(&r.pairs[pi])
		}
		p := &r.pairs[pi]
		ft := &rt.pairFlows[pi]
		for fi := p.flowStart; fi < p.flowEnd; fi++ {
			f := &r.flows[fi]
			if f.sent == 0 {
				continue
			}
			ft.count(&rt.limits, f.sent, min(f.lost, f.sent), 1)
		}
	}
}

// spreadOverHosts reports whether the loss of the pairs that take (by
// the racks of their ends) is spread: no host, source or target (a pod
// counting as its node), lost more than 3/4 of it (spread).
func (rt *rackTallies) spreadOverHosts(r *round, take func(sq, dq int) bool) bool {
	var all tally
	byHost := map[int32]tally{}
	for pi := range r.pairs {
		sq, dq := rt.racks(pi)
		if sq < 0 || !take(sq, dq) {
			continue
		}
		p := &r.pairs[pi]
		all.add(p)
		for _, h := range [2]int32{r.nodeOf(p.src), r.nodeOf(p.dst)} {
			t := byHost[h]
			t.add(p)
			byHost[h] = t
		}
	}
	for _, t := range byHost {
		if !spread(t, all) {
			return false
		}
	}
	return true
}

// lopsided reports whether one of in and out loses significantly and
// the other less than a quarter of its rate (p < sqrt(Alpha)), and which
// loses: true for out.
func lopsided(th *Thresholds, in, out tally) (lossyOut, ok bool) {
	one := func(x, y tally) bool {
		return th.isSignificant(x) && y.sent > 0 &&
			lowerTail(float64(y.lost), float64(y.sent), max(x.ratio()/4, th.Healthy)) < math.Sqrt(th.Alpha)
	}
	if one(out, in) {
		return true, true
	}
	return false, one(in, out)
}

// sides is the dispute of rack q's uplinks: the agents on the lossy side
// (its own, out of it; else the others', into it) whose pairs lose
// significantly confirm, the agents of the clean side contradict.
func (rt *rackTallies) sides(r *round, th *Thresholds, q int, take func(sq, dq int) bool, lossyOut bool) disputed {
	d := disputed{kind: KindTier, name: "uplinks of " + rt.names[q]}
	type side struct {
		t      tally
		inside bool
	}
	per := map[int32]*side{}
	var order []int32
	for pi := range r.pairs {
		sq, dq := rt.racks(pi)
		if sq < 0 || !take(sq, dq) {
			continue
		}
		p := &r.pairs[pi]
		x := per[p.src]
		if x == nil {
			x = &side{inside: sq == q}
			per[p.src] = x
			order = append(order, p.src)
		}
		x.t.add(p)
	}
	slices.Sort(order)
	for _, src := range order {
		x := per[src]
		switch {
		case x.inside == lossyOut && th.isSignificant(x.t):
			d.confirm++
			if len(d.confirmers) < maxDisputeNames {
				d.confirmers = append(d.confirmers, src)
			}
		case x.inside != lossyOut:
			d.contradict++
			if len(d.contradicts) < maxDisputeNames {
				d.contradicts = append(d.contradicts, src)
			}
		}
	}
	return d
}

// spread reports whether part holds at most 3/4 of all's lost probes.
func spread(part, all tally) bool { return 4*part.lost <= 3*all.lost }

// tor is the candidate that rack q's ToR drops, from every pair touching
// the rack.
func (rt *rackTallies) tor(r *round, th *Thresholds, q int, detail string) candidate {
	var t tally
	for pi := range r.pairs {
		if sq, dq := rt.racks(pi); sq == q || dq == q {
			t.add(&r.pairs[pi])
		}
	}
	name := rt.names[q]
	c := candidate{dev: -1}
	if d, ok := r.devID[name]; ok {
		c.dev = d
		c.Addresses = slices.Clone(r.devAddr[d])
	}
	if c.Addresses == nil {
		c.Addresses = []string{}
	}
	c.Kind, c.Name = KindDevice, name
	score(th, &c, t, detail)
	return c
}

// tier is a tier candidate named name over the pairs t tallies.
func (rt *rackTallies) tier(th *Thresholds, name string, t tally, detail string) candidate {
	c := candidate{dev: -1}
	c.Kind, c.Name, c.Addresses = KindTier, name, []string{}
	score(th, &c, t, detail)
	return c
}

// bySickFlows scores c by its sick flows where its probe totals t, which
// ECMP dilutes when one of many paths is bad, are not significant: their
// count's confidence, their loss beyond Healthy.
func bySickFlows(th *Thresholds, c *candidate, t tally, f flowTally) {
	if th.isSignificant(t) {
		return
	}
	sick, pv := th.sickFlows(f, 0)
	if !sick {
		return
	}
	c.conf = 1
	if pv > 0 {
		c.conf = min(1, math.Log(pv)/(2*math.Log(th.Alpha)))
	}
	s := f.sickProbes
	c.EstimatedLoss = s.ratio()
	c.excess = float64(s.lost) - th.Healthy*float64(s.sent)
	c.Evidence.PValue = pv
	c.Evidence.Detail += fmt.Sprintf(" (%d of its %d flows lose %.2g each, too few for its totals to show)", f.sick, f.flows, s.ratio())
}

// score sets a tier stage candidate's confidence, loss, excess and
// evidence from the pairs t tallies.
func score(th *Thresholds, c *candidate, t tally, detail string) {
	_, c.conf = th.significant(float64(t.lost), float64(t.sent))
	c.EstimatedLoss = t.ratio()
	c.excess = float64(t.lost) - th.Healthy*float64(t.sent)
	c.Evidence = Evidence{Stage: "tier", Detail: detail,
		LostProbes: float64(t.lost), SentProbes: float64(t.sent),
		PValue: upperTail(float64(t.lost), float64(t.sent), th.Healthy), Examples: []FlowRef{}}
}

// sameNode reports whether p's ends are on one node (a pod and its node,
// or two pods of it): their packets never reach the ToR.
func (r *round) sameNode(p *pair) bool {
	a := r.agents[p.agent]
	t := &a.targets[p.target]
	src := a.name
	if n := r.agentNode[p.agent]; n >= 0 {
		src = r.devName[n]
	}
	dst := t.name
	if t.class == api.ClassPod && t.node != "" {
		dst = t.node
	}
	return src == dst
}

// maxTierFlows is how many lossy flows a tier suspect lists: their
// 5-tuples are what an operator gives the fabric's ECMP hash tool.
const maxTierFlows = 16

// tierFlows says which of the flows crossing tier candidate c lose: how
// many, the share of them a two-class fit puts at a lossy rate (one path
// of several: a device or link the tier hides, not every path), the
// lossiest as examples with their 5-tuples, and whether the traced ones
// crossed a silent fabric (rflow.unseen), all or nearly all.
func (m *Matrix) tierFlows(r *round, th *Thresholds, c *candidate) {
	var lossy []int32
	var answered []string
	counts := flowCounts{}
	flows, traced, heard := 0, 0, 0
	for _, pi := range c.pairs {
		p := &r.pairs[pi]
		for fi := p.flowStart; fi < p.flowEnd; fi++ {
			f := &r.flows[fi]
			if f.sent == 0 {
				continue
			}
			counts.add(f.sent, f.lost)
			flows++
			if f.lost > 0 {
				lossy = append(lossy, fi)
			}
			if f.hopEnd > f.hopStart {
				traced++
				if !f.unseen {
					heard++
					if len(answered) < maxAnswered {
						answered = m.answered(r, f, answered)
					}
				}
			}
		}
	}
	if flows == 0 {
		return
	}
	ev := &c.Evidence
	ev.LossyFlows, ev.CleanFlows = len(lossy), flows-len(lossy)
	share, rate := lossyShare(counts, th.Healthy)
	ev.Detail += fmt.Sprintf("; %d of the %d flows crossing it lose", len(lossy), flows)
	if share < 0.8 {
		ev.Detail += fmt.Sprintf(", about %.0f%% of them at %.1f%% each, the rest clean: some of its equal-cost paths, a device or link it hides", 100*share, 100*rate)
	} else {
		ev.Detail += ", spread over all its paths"
	}
	// A router that answers one trace in twenty (a gateway of the cloud's
	// own, a device outside the tier) does not make the tier visible:
	// what it hides is as unseen.
	if traced > 0 && heard*silentShare <= traced {
		ev.Silent = true
		if heard == 0 {
			ev.Detail += fmt.Sprintf("; no router between their ends answered any of %d traces (a silent fabric)", traced)
		} else {
			ev.Detail += fmt.Sprintf("; routers between their ends answered %d of %d traces only", heard, traced)
			if len(answered) > 0 {
				ev.Detail += " (" + strings.Join(answered, ", ") + ")"
			}
			ev.Detail += ": a silent fabric"
		}
		ev.Detail += ": the examples' 5-tuples tell the fabric's ECMP hash tool which path they take"
	}
	slices.SortStableFunc(lossy, func(x, y int32) int { return cmpU64(r.flows[y].lost, r.flows[x].lost) })
	for _, fi := range lossy[:min(len(lossy), maxTierFlows)] {
		ev.Examples = append(ev.Examples, m.flowRef(r, fi))
	}
}

// silentShare: a tier's flows crossed a silent fabric while at most one
// traced flow in silentShare heard a router between its ends.
const silentShare = 20

// maxAnswered bounds the addresses a silent tier's detail names.
const maxAnswered = 3

// answered appends to out the addresses of the routers flow f's trace
// heard that out does not hold yet.
func (m *Matrix) answered(r *round, f *rflow, out []string) []string {
	a := r.agents[r.pairs[f.pair].agent]
	for _, h := range a.hops[f.hopStart:f.hopEnd] {
		if h < 0 {
			continue
		}
		if d := m.resolve(r, h); d >= 0 && r.isSwitch(d) && !slices.Contains(out, m.addrs[h]) && len(out) < maxAnswered {
			out = append(out, m.addrs[h])
		}
	}
	return out
}

// flowCounts is a histogram of flows by their (sent, lost) counts: most
// flows share a few, so a fit over it costs little at any scale.
type flowCounts map[tally]int

func (fc flowCounts) add(sent, lost uint64) { fc[tally{sent: sent, lost: min(lost, sent)}]++ }

// keys are fc's counts in a fixed order: sums over them (floating point)
// come out the same every round, as the matrix must.
func (fc flowCounts) keys() []tally {
	keys := make([]tally, 0, len(fc))
	for k := range fc {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y tally) int { return cmp.Or(cmpU64(x.sent, y.sent), cmpU64(x.lost, y.lost)) })
	return keys
}

// lossyShare fits the flows' counts as a share of flows that lose at one
// rate and the rest at the healthy rate h (expectation-maximisation over
// the two classes, from a fixed start and in a fixed order:
// deterministic), and returns the share and the rate. Loss spread over
// every path fits a share near 1.
func lossyShare(fc flowCounts, h float64) (share, rate float64) {
	keys := fc.keys()
	var all tally
	var flows float64
	for _, k := range keys {
		n := fc[k]
		all.sent += k.sent * uint64(n)
		all.lost += k.lost * uint64(n)
		flows += float64(n)
	}
	if all.lost == 0 {
		return 0, 0
	}
	share, rate = 0.5, min(0.99, max(2*all.ratio(), 2*h))
	lh, l1h := math.Log(h), math.Log1p(-h)
	for range 100 {
		var w, wl, ws float64
		lr, l1r := math.Log(rate), math.Log1p(-rate)
		for _, k := range keys {
			n := float64(fc[k])
			lost, kept := float64(k.lost), float64(k.sent-k.lost)
			a := math.Log(share) + lost*lr + kept*l1r
			b := math.Log1p(-share) + lost*lh + kept*l1h
			p := n / (1 + math.Exp(b-a))
			w += p
			wl += p * lost
			ws += p * float64(k.sent)
		}
		share = min(max(w/flows, 1e-6), 1-1e-6)
		if ws > 0 {
			rate = min(max(wl/ws, h), 0.999)
		}
	}
	return share, rate
}

// upperTier names the devices one hop above the access devices: no
// host, and no VIP (a one-arm LB hangs off the spines, it is no tier).
func upperTier(r *round) []string {
	acc := map[int32]bool{}
	for d := range r.devAcc {
		if sw := r.switchOf(int32(d)); r.devHost[d] && sw >= 0 {
			acc[sw] = true
		}
	}
	up := map[string]bool{}
	for _, lk := range r.links {
		if acc[lk.from] && !r.devHost[lk.to] && !r.devLB[lk.to] && !acc[lk.to] {
			up[r.devName[lk.to]] = true
		}
	}
	return sortedKeys(up)
}
