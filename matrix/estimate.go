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
}

type weighted struct {
	link int32
	w    float64
}

// estimatorRho is the L1 weight, in probes: a link must explain more than
// one lost probe's worth of likelihood to leave zero.
const estimatorRho = 1.0

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
	mixSent := e.mixSent

	var inc []weighted
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
				inc = addWeighted(inc, l, 1)
			}
		}
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
						inc = addWeighted(inc, l, 1)
					}
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
	for sweep := 0; sweep < 100; sweep++ {
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
			break
		}
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
