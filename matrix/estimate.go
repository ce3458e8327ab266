package matrix

import (
	"math"
	"slices"
)

// estimator fits every link's loss rate from all traced flows, lossy and
// clean, after NetBouncer: a flow's success probability is the product of
// its links' success probabilities x_e. In log space -log x_e = q_e adds
// along a path, and at the small rates of a data center a flow's lost
// probes are Poisson with mean sent * sum(q_e). The fit maximises that
// likelihood minus rho * sum(q_e), an L1 regulariser that pushes good
// links to exactly 1 (q = 0), by coordinate descent: one link at a time,
// a safeguarded Newton solve of its 1-D optimality condition. Clean flows
// enter only through each link's probe total, so a sweep costs time in
// the lossy flows alone.
//
// The reply's path is unknown (its own ECMP hash picks it), so each flow
// also carries its reverse: the target's access links, the mixture of
// links seen on forward paths between the two switches, and the
// source's access links. Without it a lossy downlink would smear its
// replies' losses over every uplink of the rack it feeds.
//
// This fit is the screen: it spreads each flow's loss over the mixture
// by the sampled shares, and where links are collinear its L1 solution
// is one of many. The links it finds lossy, and what they touch, are the
// hypotheses the selector weighs with each reply's path as the single
// path it is (select.go). It also sums the clean flows for the selector
// (cleanSums).
type estimator struct {
	q    []float64 // fitted loss rate per link
	sent []float64 // probes through each link (reverse mixtures weighted)
	lost []float64 // lost probes attributed to each link by the fit

	lossyFlows []int32 // forward flows through the link that lost probes
	cleanFlows []int32

	// For the selector: every flow that lost probes and has a traced
	// path, and the clean flows' probes summed.
	lossy []int32
	clean cleanSums

	// Lossy flows and their incidences (link, weight), per flow and
	// per link (CSR).
	lf      []int32 // index into round.flows
	lam     []float64
	fInc    []int32 // offsets into incLink/incW, len(lf)+1
	incLink []int32
	incW    []float64
	eInc    []int32 // offsets into eFlow/eW, len(links)+1
	eFlow   []int32 // index into lf
	eW      []float64
	eLost   []float64 // lost probes of eFlow's flow, beside it for solve
	rest    []float64 // solve's scratch: each incidence's flow rate without l

	mixW    [][]weighted // compressed mixtures by mixture id
	mixDone []bool
	mixSent []float64
	fill    []int32

	comps    [][]component // distinct reply middles, by mixture id
	compDone []bool
}

// cleanSums are the probes of the clean flows, by where they cross the
// fabric, as the selector weighs them: a clean flow's likelihood is
// linear in the rates along its forward path and its reply's access
// links, so sums do; only its reply's middle is not, and clean flows
// with the same mixture and probe count share it.
type cleanSums struct {
	fwd   []float64 // per link: probes through it on forward paths
	start []float64 // per link: the same, where the path did not just enter its from device (a silent hop, or the start)
	acc   []float64 // per link: probes whose replies cross it as an access link
	sw    []float64 // per device: probes whose replies cross it at the ends of their middle
	// groups counts clean flows by reply mixture and probes sent;
	// mixGroup is each mixture's first group (-1: none), next chains
	// a mixture's groups.
	groups   []cleanGroup
	mixGroup []int32
	last     int32 // the group add counted last, or -1
}

type cleanGroup struct {
	mix      int32
	n, count float64
	next     int32
}

func (c *cleanSums) reset(nl, nd, nm int) {
	c.fwd, c.start, c.acc, c.sw = resize(c.fwd, nl), resize(c.start, nl), resize(c.acc, nl), resize(c.sw, nd)
	c.groups = c.groups[:0]
	c.mixGroup = fill(c.mixGroup, nm, -1)
	c.last = -1
}

// add adds a clean flow of n probes: its forward links, and when its
// target is a host, its reply's path rev (access links revLinks).
func (c *cleanSums) add(r *round, fwd []int32, n float64, hostDst bool, rev *reversePath, revLinks []int32) {
	if r.middleGap(fwd) {
		return // the selector leaves it out
	}
	prev := int32(-1)
	for _, l := range fwd {
		lk := r.links[l]
		c.fwd[l] += n
		if lk.from != prev {
			c.start[l] += n
		}
		prev = lk.to
	}
	if !hostDst || !rev.known() {
		return
	}
	for _, l := range revLinks {
		c.acc[l] += n
	}
	c.sw[rev.swDst] += n
	if rev.swSrc != rev.swDst {
		c.sw[rev.swSrc] += n
	}
	if rev.mix < 0 {
		return
	}
	g := c.last
	if g < 0 || c.groups[g].mix != rev.mix || c.groups[g].n != n {
		for g = c.mixGroup[rev.mix]; g >= 0 && c.groups[g].n != n; g = c.groups[g].next {
		}
		if g < 0 {
			g = int32(len(c.groups))
			c.groups = append(c.groups, cleanGroup{mix: rev.mix, n: n, next: c.mixGroup[rev.mix]})
			c.mixGroup[rev.mix] = g
		}
		c.last = g
	}
	c.groups[g].count++
}

// component is one distinct middle of a mixture: a reply path between
// two access devices, and the share of the sampled flows that took it.
type component struct {
	links []int32
	w     float64
}

// weighted is a link and its weight: in a mixture, its share; in a lossy
// flow's incidences, how often the flow's rate counts it.
type weighted struct {
	link int32
	w    float64
}

// estimatorRho is the L1 weight, in probes: a link must explain more than
// one lost probe's worth of likelihood to leave zero.
const estimatorRho = 1.0

// fit fits the rates.
func (e *estimator) fit(r *round) {
	nl := len(r.links)
	e.q = resize(e.q, nl)
	e.sent = resize(e.sent, nl)
	e.lost = resize(e.lost, nl)
	e.lossyFlows = resize(e.lossyFlows, nl)
	e.cleanFlows = resize(e.cleanFlows, nl)
	e.lf, e.fInc, e.incLink, e.incW = e.lf[:0], append(e.fInc[:0], 0), e.incLink[:0], e.incW[:0]
	e.mixW = slices.Grow(e.mixW[:0], len(r.mixes))[:len(r.mixes)] // storage reused by mixture
	e.mixDone = resize(e.mixDone, len(r.mixes))
	e.mixSent = resize(e.mixSent, len(r.mixes))
	e.comps = slices.Grow(e.comps[:0], len(r.mixes))[:len(r.mixes)]
	e.compDone = resize(e.compDone, len(r.mixes))
	mixSent := e.mixSent

	e.clean.reset(nl, len(r.devName), len(r.mixes))
	e.lossy = e.lossy[:0]
	var inc []weighted
	lastPair := int32(-1)
	var rev reversePath
	var revBuf [2 * maxAccess]int32
	var revLinks []int32
	for fi := range r.flows {
		f := &r.flows[fi]
		if f.linkStart == f.linkEnd {
			continue
		}
		n := float64(f.sent)
		fwd := r.flowLinks[f.linkStart:f.linkEnd]
		for _, l := range fwd {
			e.sent[l] += n
			if f.lost > 0 {
				e.lossyFlows[l]++
			} else {
				e.cleanFlows[l]++
			}
		}
		inc = inc[:0]
		if f.lost > 0 {
			e.lossy = append(e.lossy, int32(fi))
			for _, l := range fwd {
				inc = addWeighted(inc, l, 1)
			}
		}
		hostDst := r.devHost[f.dst] && !r.devLB[f.dst]
		if hostDst && f.pair != lastPair {
			lastPair = f.pair
			rev = e.reverse(r, f.src, f.dst)
			revLinks = rev.links(&revBuf)
			if !rev.known() {
				revLinks = revLinks[:0]
			}
		}
		if f.lost == 0 {
			e.clean.add(r, fwd, n, hostDst, &rev, revLinks)
		}
		// The reply's path. The per-link fit only screens for what
		// the selector judges, and a trace that lost hops (a black
		// hole's, mostly) is the least sure of its flow's path: only
		// complete traces model their replies here. The selector
		// models the reply of every flow it weighs.
		if f.complete && f.entry >= 0 && hostDst {
			for _, l := range revLinks {
				e.sent[l] += n
				if f.lost > 0 {
					inc = addWeighted(inc, l, 1)
				}
			}
			if rev.mix >= 0 {
				mixSent[rev.mix] += n
				if f.lost > 0 {
					for _, w := range e.mixture(r, rev.mix) {
						inc = addWeighted(inc, w.link, w.w)
					}
				}
			}
		}
		if f.lost > 0 && len(inc) > 0 {
			e.lf = append(e.lf, int32(fi))
			for _, w := range inc {
				e.incLink = append(e.incLink, w.link)
				e.incW = append(e.incW, w.w)
			}
			e.fInc = append(e.fInc, int32(len(e.incLink)))
		}
	}
	for id, s := range mixSent {
		if s > 0 {
			for _, w := range e.mixture(r, int32(id)) {
				e.sent[w.link] += s * w.w
			}
		}
	}

	// Per-link incidence lists.
	e.eInc = resize(e.eInc, nl+1)
	for _, l := range e.incLink {
		e.eInc[l+1]++
	}
	for i := 1; i <= nl; i++ {
		e.eInc[i] += e.eInc[i-1]
	}
	e.eFlow = resize(e.eFlow, len(e.incLink))
	e.eW = resize(e.eW, len(e.incLink))
	e.eLost = resize(e.eLost, len(e.incLink))
	e.fill = append(e.fill[:0], e.eInc[:nl]...)
	fill := e.fill
	for k, fi := range e.lf {
		lost := float64(r.flows[fi].lost)
		for j := e.fInc[k]; j < e.fInc[k+1]; j++ {
			l := e.incLink[j]
			e.eFlow[fill[l]] = int32(k)
			e.eW[fill[l]] = e.incW[j]
			e.eLost[fill[l]] = lost
			fill[l]++
		}
	}

	// Start from 007's even split, then descend.
	e.lam = resize(e.lam, len(e.lf))
	for k, fi := range e.lf {
		w := 0.0
		for j := e.fInc[k]; j < e.fInc[k+1]; j++ {
			w += e.incW[j]
		}
		l := float64(r.flows[fi].lost)
		for j := e.fInc[k]; j < e.fInc[k+1]; j++ {
			e.q[e.incLink[j]] += l * e.incW[j] / w
		}
	}
	for l := range e.q {
		if e.q[l] > 0 {
			e.q[l] /= e.sent[l] + estimatorRho
		}
	}
	e.recompute()
	// A screen: 30 sweeps put the loss where the selector looks for it.
	e.descend(nl, 30)
	for k, fi := range e.lf {
		l := float64(r.flows[fi].lost)
		for j := e.fInc[k]; j < e.fInc[k+1]; j++ {
			if lk := e.incLink[j]; e.lam[k] > 0 {
				e.lost[lk] += l * e.incW[j] * e.q[lk] / e.lam[k]
			}
		}
	}
}

// descend runs coordinate descent sweeps until no link's rate moves, at
// most maxSweeps.
func (e *estimator) descend(nl, maxSweeps int) {
	for sweep := 0; sweep < maxSweeps; sweep++ {
		delta := 0.0
		for l := range nl {
			if e.eInc[l] == e.eInc[l+1] {
				continue
			}
			nq := e.solve(int32(l))
			if d := nq - e.q[l]; d != 0 {
				for j := e.eInc[l]; j < e.eInc[l+1]; j++ {
					e.lam[e.eFlow[j]] += e.eW[j] * d
				}
				e.q[l] = nq
				delta = max(delta, math.Abs(d))
			}
		}
		if delta < 1e-5 { // loss rates to 1e-5: below Healthy by 100x
			return
		}
	}
}

// components returns mixture id's distinct middles and their shares.
func (e *estimator) components(r *round, id int32) []component {
	if e.compDone[id] {
		return e.comps[id]
	}
	mx := &r.mixes[id]
	cs := e.comps[id][:0]
	start := int32(0)
	for _, end := range mx.ends {
		mid := mx.links[start:end]
		start = end
		if i := slices.IndexFunc(cs, func(c component) bool { return slices.Equal(c.links, mid) }); i >= 0 {
			cs[i].w++
			continue
		}
		cs = append(cs, component{links: mid, w: 1})
	}
	for i := range cs {
		cs[i].w /= float64(mx.flows)
	}
	e.comps[id], e.compDone[id] = cs, true
	return cs
}

func (e *estimator) recompute() {
	for k := range e.lf {
		s := 0.0
		for j := e.fInc[k]; j < e.fInc[k+1]; j++ {
			s += e.incW[j] * e.q[e.incLink[j]]
		}
		e.lam[k] = s
	}
}

// solve returns the q of link l that maximises the penalised likelihood
// with every other link fixed: the root of
// h(q) = sum_f w l_f / (r_f + w q) - (sent + rho), decreasing in q.
//
// The other links' share of each flow's rate does not change during the
// solve, so it is computed once into e.rest and the Newton steps read
// contiguous arrays only.
func (e *estimator) solve(l int32) float64 {
	cur := e.q[l]
	d := e.sent[l] + estimatorRho
	lo, hi := 0.0, 0.0
	zeroRest := false
	h0 := -d
	a, b := e.eInc[l], e.eInc[l+1]
	ws, ls, ks := e.eW[a:b], e.eLost[a:b], e.eFlow[a:b]
	rests := slices.Grow(e.rest[:0], len(ws))[:len(ws)]
	e.rest = rests
	for j, w := range ws {
		lost := ls[j]
		rest := e.lam[ks[j]] - w*cur
		rests[j] = max(rest, 0)
		hi += lost
		if rest <= 1e-15 {
			zeroRest = true
		} else {
			h0 += w * lost / rest
		}
	}
	if !zeroRest && h0 <= 0 {
		return 0
	}
	hi /= d
	q := min(max(cur, hi*1e-3), hi)
	for range 50 {
		h, dh := -d, 0.0
		for j, w := range ws {
			lost := ls[j]
			den := rests[j] + w*q
			h += w * lost / den
			dh -= w * w * lost / (den * den)
		}
		if h > 0 {
			lo = q
		} else {
			hi = q
		}
		next := q - h/dh
		if dh == 0 || next <= lo || next >= hi {
			next = (lo + hi) / 2
		}
		if math.Abs(next-q) <= 1e-9+1e-6*q {
			return next
		}
		q = next
	}
	return q
}

func (e *estimator) mixture(r *round, id int32) []weighted {
	if e.mixDone[id] {
		return e.mixW[id]
	}
	mx := &r.mixes[id]
	ws := e.mixW[id][:0] // few distinct links (two per spine): scan, not sort
	for _, l := range mx.links {
		ws = addWeighted(ws, l, 1/float64(mx.flows))
	}
	slices.SortFunc(ws, func(a, b weighted) int { return int(a.link - b.link) })
	e.mixW[id], e.mixDone[id] = ws, true
	return ws
}

// addWeighted adds w to link l's weight in ws.
func addWeighted(ws []weighted, l int32, w float64) []weighted {
	for i := range ws {
		if ws[i].link == l {
			ws[i].w += w
			return ws
		}
	}
	return append(ws, weighted{l, w})
}

// resize returns s with length n, zeroed, reusing its storage.
func resize[T any](s []T, n int) []T {
	s = slices.Grow(s[:0], n)[:n]
	clear(s)
	return s
}

// fill returns s with length n, every element v, reusing its storage.
func fill[T any](s []T, n int, v T) []T {
	s = slices.Grow(s[:0], n)[:n]
	for i := range s {
		s[i] = v
	}
	return s
}

// maxAccess bounds the access devices climbed from a host to its switch:
// a pod's node, then the node's ToR.
const maxAccess = 3

// reversePath is what is known of a reply's path: the links up from the
// target and down to the source, in path order (-1 for a link never
// seen), and between them the mixture from the target's switch to the
// source's (-1: none, or unknown). The reply climbs the target's access
// devices (a pod's node, the node's ToR) until one the source hangs
// off too: a pod's reply to its own node comes straight from the node,
// a rack-mate's through the ToR. Between two racks it climbs to the
// target's ToR and crosses the mixture to the source's.
type reversePath struct {
	up, down     [maxAccess]int32
	nUp, nDown   int
	swDst, swSrc int32 // where the up and down parts end: the same device, or a mixture's ends
	mix          int32
}

// links returns the known access links of rp, up then down, in buf.
func (rp *reversePath) links(buf *[2 * maxAccess]int32) []int32 {
	out := buf[:0]
	for _, l := range rp.up[:rp.nUp] {
		if l >= 0 {
			out = append(out, l)
		}
	}
	for _, l := range rp.down[:rp.nDown] {
		if l >= 0 {
			out = append(out, l)
		}
	}
	return out
}

// known reports whether anything of the reply's path is known.
func (rp *reversePath) known() bool { return rp.swDst >= 0 }

// reverse is the path of the replies from dst to src, from the access
// devices of both (devAcc): nothing when they share none and either
// hangs off no switch (a flat network, or one not seen yet).
func (e *estimator) reverse(r *round, src, dst int32) reversePath {
	rp := reversePath{mix: -1, swDst: -1, swSrc: -1}
	if as, ad := r.devAcc[src], r.devAcc[dst]; as >= 0 && ad >= 0 && r.isSwitch(as) && r.isSwitch(ad) && r.isHost(src) && r.isHost(dst) {
		// Two nodes, each behind its ToR: most pairs.
		rp.up[0], rp.down[0], rp.nUp, rp.nDown = r.lookupLink(dst, ad), r.lookupLink(as, src), 1, 1
		rp.swDst, rp.swSrc = ad, as
		if as != ad {
			if id, ok := r.mixID[uint64(uint32(ad))<<32|uint64(uint32(as))]; ok {
				rp.mix = id
			}
		}
		return rp
	}
	var sc [maxAccess + 1]int32
	ns := r.accessChain(src, &sc)
	var dc [maxAccess + 1]int32
	nd := r.accessChain(dst, &dc)
	if ns == 0 || nd == 0 {
		return rp
	}
	// The lowest device both hang off, if any.
	ci, cj := -1, -1
	for i := range nd {
		if j := slices.Index(sc[:ns], dc[i]); j >= 0 {
			ci, cj = i, j
			break
		}
	}
	top, bottom := ci, cj
	if ci < 0 {
		top, bottom = nd-1, ns-1
		if r.devHost[dc[top]] || r.devHost[sc[bottom]] {
			return rp // a chain that ends before a switch
		}
	}
	for i := range top {
		rp.up[rp.nUp] = r.lookupLink(dc[i], dc[i+1])
		rp.nUp++
	}
	for j := bottom; j > 0; j-- {
		rp.down[rp.nDown] = r.lookupLink(sc[j], sc[j-1])
		rp.nDown++
	}
	rp.swDst, rp.swSrc = dc[top], sc[bottom]
	if ci < 0 {
		if id, ok := r.mixID[uint64(uint32(rp.swDst))<<32|uint64(uint32(rp.swSrc))]; ok {
			rp.mix = id
		}
	}
	return rp
}
