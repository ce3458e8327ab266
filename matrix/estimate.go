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
// also carries its reverse: the target's access link, the mixture of
// links seen on forward paths between the two access devices, and the
// source's access link. Without it a lossy downlink would smear its
// replies' losses over every uplink of the rack it feeds.
type estimator struct {
	q    []float64 // fitted loss rate per link
	sent []float64 // probes through each link (reverse mixtures weighted)
	lost []float64 // lost probes attributed to each link by the fit

	lossyFlows []int32 // forward flows through the link that lost probes
	cleanFlows []int32

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

	// The reply paths' posteriors (see posteriors): each lossy flow's
	// mixture (-1 for none), each incidence's weight from the forward
	// path and access links alone, and where the incidence sits in the
	// per-link lists.
	lfMix    []int32
	incBase  []float64
	incPos   []int32
	comps    [][]component // distinct reply middles, by mixture id
	compDone []bool
	ll       []float64 // posteriors' scratch, per component
	acc      []float64 // posteriors' scratch, per link
}

// component is one distinct middle of a mixture: a reply path between
// two access devices, and the share of the sampled flows that took it.
type component struct {
	links []int32
	w     float64
}

// emRounds bounds the refits after the reply paths' posteriors change.
const emRounds = 1

type weighted struct {
	link int32
	w    float64
}

// estimatorRho is the L1 weight, in probes: a link must explain more than
// one lost probe's worth of likelihood to leave zero.
const estimatorRho = 1.0

// fit fits the rates; background is the loss a healthy path may have
// (Thresholds.Healthy), which the reply paths' posteriors assume of every
// path.
func (e *estimator) fit(r *round, background float64) {
	nl := len(r.links)
	e.q = resize(e.q, nl)
	e.sent = resize(e.sent, nl)
	e.lost = resize(e.lost, nl)
	e.lossyFlows = resize(e.lossyFlows, nl)
	e.cleanFlows = resize(e.cleanFlows, nl)
	e.lf, e.fInc, e.incLink, e.incW = e.lf[:0], append(e.fInc[:0], 0), e.incLink[:0], e.incW[:0]
	e.lfMix, e.incBase = e.lfMix[:0], e.incBase[:0]
	e.mixW = slices.Grow(e.mixW[:0], len(r.mixes))[:len(r.mixes)] // storage reused by mixture
	e.mixDone = resize(e.mixDone, len(r.mixes))
	e.mixSent = resize(e.mixSent, len(r.mixes))
	e.comps = slices.Grow(e.comps[:0], len(r.mixes))[:len(r.mixes)]
	e.compDone = resize(e.compDone, len(r.mixes))
	mixSent := e.mixSent

	var inc []incidence
	lastPair := int32(-1)
	var rev reversePath
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
			for _, l := range fwd {
				inc = addIncidence(inc, l, 1, 1)
			}
		}
		mix := int32(-1)
		// The reply's path. A flow that met no device before its
		// target (a flat network) has none to come back through.
		if f.complete && f.entry >= 0 && r.devHost[f.dst] {
			if f.pair != lastPair {
				lastPair = f.pair
				rev = e.reverse(r, f.src, f.dst)
			}
			for _, l := range rev.access {
				if l >= 0 {
					e.sent[l] += n
					if f.lost > 0 {
						inc = addIncidence(inc, l, 1, 1)
					}
				}
			}
			if rev.mix >= 0 {
				mixSent[rev.mix] += n
				if f.lost > 0 {
					mix = rev.mix
					for _, w := range e.mixture(r, rev.mix) {
						inc = addIncidence(inc, w.link, w.w, 0)
					}
				}
			}
		}
		if f.lost > 0 && len(inc) > 0 {
			e.lf = append(e.lf, int32(fi))
			e.lfMix = append(e.lfMix, mix)
			for _, w := range inc {
				e.incLink = append(e.incLink, w.link)
				e.incW = append(e.incW, w.w)
				e.incBase = append(e.incBase, w.base)
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
	e.incPos = resize(e.incPos, len(e.incLink))
	for k, fi := range e.lf {
		lost := float64(r.flows[fi].lost)
		for j := e.fInc[k]; j < e.fInc[k+1]; j++ {
			l := e.incLink[j]
			e.incPos[j] = fill[l]
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
	// The first fit only seeds the posteriors, which move the weights it
	// fits: a few sweeps do, and the last fit runs to convergence.
	e.descend(nl, 30)
	for range emRounds {
		if !e.posteriors(r, background) {
			break
		}
		e.recompute()
		e.descend(nl, 100)
	}
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

// posteriors weighs each lossy flow's possible reply paths by how well
// each explains its loss, where the first fit spread it by how often
// sampled flows took each. A flow's reply takes one path, picked by its
// own ECMP hash, the same for every probe of the flow: with two spines, a
// flow whose forward path is clean but whose replies cross a lossy spine
// loses at that spine's rate, and spreading that over both spines puts
// half of it on the clean spine's links, which in a small fabric is
// enough to name the clean spine or a ToR. The E step of an EM over the
// mixture's components: posterior proportional to the component's share
// times the Poisson likelihood of the flow's lost probes given the
// current rates, every path also losing background. Without that floor
// a path fitted at rate 0 would be impossible, and one lost probe of
// background noise would move a flow's whole reply onto whichever path
// the fit happened to give a trace of loss: a healthy fabric grew a
// suspect that way. Clean flows keep the shares: their exposure is
// spread as before. It reports whether any weight moved.
func (e *estimator) posteriors(r *round, background float64) bool {
	nl := len(r.links)
	e.acc = resize(e.acc, nl)
	moved := false
	for k, fi := range e.lf {
		m := e.lfMix[k]
		if m < 0 {
			continue
		}
		comps := e.components(r, m)
		if len(comps) < 2 {
			continue
		}
		f := &r.flows[fi]
		n, lost := float64(f.sent), float64(f.lost)
		a, b := e.fInc[k], e.fInc[k+1]
		base := 0.0
		for j := a; j < b; j++ {
			base += e.incBase[j] * e.q[e.incLink[j]]
		}
		e.ll = slices.Grow(e.ll[:0], len(comps))[:len(comps)]
		best := math.Inf(-1)
		for ci, c := range comps {
			qc := base
			for _, l := range c.links {
				qc += e.q[l]
			}
			lam := n * (background + qc)
			e.ll[ci] = math.Log(c.w) + lost*math.Log(lam) - lam
			best = max(best, e.ll[ci])
		}
		sum := 0.0
		for ci := range comps {
			e.ll[ci] = math.Exp(e.ll[ci] - best)
			sum += e.ll[ci]
		}
		for ci, c := range comps {
			for _, l := range c.links {
				e.acc[l] += e.ll[ci] / sum
			}
		}
		for j := a; j < b; j++ {
			l := e.incLink[j]
			w := e.incBase[j] + e.acc[l]
			if d := w - e.incW[j]; d != 0 {
				// A refit is worth its sweeps when some reply moved
				// by a twentieth of a share.
				moved = moved || math.Abs(d) > 0.05
				e.sent[l] += n * d
				e.incW[j], e.eW[e.incPos[j]] = w, w
			}
		}
		for _, c := range comps {
			for _, l := range c.links {
				e.acc[l] = 0
			}
		}
	}
	return moved
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

// incidence is one link of a lossy flow: its weight in the flow's rate,
// and the part of it that is the forward path and access links.
type incidence struct {
	link    int32
	w, base float64
}

func addIncidence(inc []incidence, l int32, w, base float64) []incidence {
	for i := range inc {
		if inc[i].link == l {
			inc[i].w += w
			inc[i].base += base
			return inc
		}
	}
	return append(inc, incidence{l, w, base})
}

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

// reversePath is what is known of a reply's path: the target's access
// link up, the source's access link down (-1 when never seen), and the
// mixture between their access devices (-1: same device or unknown).
type reversePath struct {
	access [2]int32
	mix    int32
}

func (e *estimator) reverse(r *round, src, dst int32) reversePath {
	rp := reversePath{access: [2]int32{-1, -1}, mix: -1}
	accS, accD := r.devAcc[src], r.devAcc[dst]
	if accS < 0 || accD < 0 {
		return rp
	}
	for i, lk := range [2]link{{dst, accD}, {accS, src}} {
		rp.access[i] = r.lookupLink(lk.from, lk.to)
	}
	if accS != accD {
		if id, ok := r.mixID[uint64(uint32(accD))<<32|uint64(uint32(accS))]; ok {
			rp.mix = id
		}
	}
	return rp
}
