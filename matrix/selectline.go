package matrix

import (
	"math"
	"slices"
)

// The selector's 1-D fits: one hypothesis's rate with the others held.

// line is the log-likelihood as a function of one hypothesis's rate q,
// the others held: per lossy flow, the reply paths that do not cross
// it summed into one constant term, and for those that do, the rate
// without it, how often they cross it and their log share; the same for
// the clean groups; and the clean flows' linear exposure. At 5,000
// nodes every reply crosses one of eight spines: holding the other
// seven in a constant keeps a spine's line an eighth of the size.
type line struct {
	flows  entries // per lossy flow; its c0 the constant paths' log-likelihood, or -Inf
	groups entries // per clean group (no lost probes)
	clean  float64
	wx, ww []float64 // solve's scratch
}

// entries are one kind of a line's terms: per entry its lost probes k,
// its probes n, its constant term c0 and how many alike (cnt), then its
// varying paths from start[i] (len(k)+1 once closed): their base rate,
// crossings of the hypothesis and log share. Entries alike in everything
// the line reads are one with a count: before any hypothesis is chosen
// a spine's line has a handful of distinct entries among 80,000 flows.
type entries struct {
	k, n, c0, cnt []float64
	start         []int32
	lam0, x, logw []float64
	key           map[lineKey]int32
}

// lineKey is an entry of a line with at most two varying paths.
type lineKey struct {
	k, n, c0      float64
	np            int
	lam0, x, logw [2]float64
}

func (ln *line) reset(clean float64) {
	ln.flows.reset()
	ln.groups.reset()
	ln.clean = clean
}

func (e *entries) reset() {
	e.k, e.n, e.c0, e.cnt, e.start = e.k[:0], e.n[:0], e.c0[:0], e.cnt[:0], e.start[:0]
	e.lam0, e.x, e.logw = e.lam0[:0], e.x[:0], e.logw[:0]
	if e.key == nil {
		e.key = map[lineKey]int32{}
	}
	clear(e.key)
}

// open starts an entry; its varying paths follow (addPath), then close.
func (e *entries) open(k, n, cnt float64) int {
	e.k, e.n, e.cnt, e.start = append(e.k, k), append(e.n, n), append(e.cnt, cnt), append(e.start, int32(len(e.lam0)))
	return len(e.lam0)
}

// close ends the entry open started, with the constant paths' c0, and
// merges it into an earlier one alike.
func (e *entries) close(c0 float64) {
	i := len(e.k) - 1
	from := int(e.start[i])
	e.c0 = append(e.c0, c0)
	np := len(e.lam0) - from
	if np > 2 {
		return
	}
	key := lineKey{k: e.k[i], n: e.n[i], c0: c0, np: np}
	copy(key.lam0[:], e.lam0[from:])
	copy(key.x[:], e.x[from:])
	copy(key.logw[:], e.logw[from:])
	if j, ok := e.key[key]; ok {
		e.cnt[j] += e.cnt[i]
		e.k, e.n, e.c0, e.cnt, e.start = e.k[:i], e.n[:i], e.c0[:i], e.cnt[:i], e.start[:i]
		e.lam0, e.x, e.logw = e.lam0[:from], e.x[:from], e.logw[:from]
		return
	}
	e.key[key] = int32(i)
}

// done closes the list of entries: start gets its final bound.
func (e *entries) done() { e.start = append(e.start, int32(len(e.lam0))) }

// addPath adds a varying path to the entry whose paths start at from,
// merged with one that has the same rate and crossings: with one
// hypothesis chosen or none, most of a flow's paths are alike.
func (e *entries) addPath(from int, lam, x, lw float64) {
	for j := from; j < len(e.lam0); j++ {
		if e.lam0[j] == lam && e.x[j] == x {
			e.logw[j] = logAddExp(e.logw[j], lw)
			return
		}
	}
	e.lam0, e.x, e.logw = append(e.lam0, lam), append(e.x, x), append(e.logw, lw)
}

// solve fits hypothesis h's rate with the others held at s.q (h's own
// entry ignored) and returns it and the log-likelihood it gains over
// rate 0.
func (s *selector) solve(h int32) (float64, float64) {
	ln := &s.line
	ln.reset(s.clean[h])
	qh := s.q[h]
	s.q[h] = 0
	defer func() { s.q[h] = qh }()
	for _, fi := range s.hf[s.hfStart[h]:s.hfStart[h+1]] {
		f := &s.flows[fi]
		base, xa := s.bg, 0.0
		for _, x := range s.xs[f.xs:f.xe] {
			base += s.q[x.h] * x.x
			if x.h == h {
				xa += x.x
			}
		}
		from := ln.flows.open(f.k, f.n, f.cnt)
		if f.mix < 0 {
			ln.flows.addPath(from, base, xa, 0)
			ln.flows.close(math.Inf(-1))
			continue
		}
		c0 := math.Inf(-1)
		if !s.touched[fi] {
			// No chosen hypothesis touches it: every path at the
			// background rate; one logarithm for the paths that do
			// not cross h.
			w0 := 0.0
			ln.wx, ln.ww = ln.wx[:0], ln.ww[:0] // the shares of the paths by crossings
			for c, xs := range s.mixX[f.mix] {
				xc := xa + crossings(xs, h)
				if xc == 0 {
					w0 += s.mixW[f.mix][c]
					continue
				}
				if i := slices.Index(ln.wx, xc); i >= 0 {
					ln.ww[i] += s.mixW[f.mix][c]
				} else {
					ln.wx, ln.ww = append(ln.wx, xc), append(ln.ww, s.mixW[f.mix][c])
				}
			}
			for i, xc := range ln.wx {
				ln.flows.lam0, ln.flows.x, ln.flows.logw = append(ln.flows.lam0, base), append(ln.flows.x, xc), append(ln.flows.logw, math.Log(ln.ww[i]))
			}
			if w0 > 0 {
				c0 = math.Log(w0) + f.k*math.Log(f.n*base) - f.n*base
			}
			ln.flows.close(c0)
			continue
		}
		for c, xs := range s.mixX[f.mix] {
			l, xc := base, xa
			for _, x := range xs {
				l += s.q[x.h] * x.x
				if x.h == h {
					xc += x.x
				}
			}
			lw := s.mixLogW[f.mix][c]
			if xc == 0 {
				c0 = logAddExp(c0, lw+f.k*math.Log(f.n*l)-f.n*l)
				continue
			}
			ln.flows.addPath(from, l, xc, lw)
		}
		ln.flows.close(c0)
	}
	ln.flows.done()
	for _, gi := range s.hg[s.hgStart[h]:s.hgStart[h+1]] {
		g := &s.groups[gi]
		from := ln.groups.open(0, g.n, g.count)
		c0 := math.Inf(-1)
		if !s.gtouched[gi] {
			w0 := 0.0
			for c, xs := range s.mixX[g.mix] {
				if xc := crossings(xs, h); xc != 0 {
					ln.groups.addPath(from, 0, xc, s.mixLogW[g.mix][c])
				} else {
					w0 += s.mixW[g.mix][c]
				}
			}
			if w0 > 0 {
				c0 = math.Log(w0)
			}
			ln.groups.close(c0)
			continue
		}
		for c, xs := range s.mixX[g.mix] {
			l, xc := 0.0, 0.0
			for _, x := range xs {
				l += s.q[x.h] * x.x
				if x.h == h {
					xc += x.x
				}
			}
			lw := s.mixLogW[g.mix][c]
			if xc == 0 {
				c0 = logAddExp(c0, lw-g.n*l)
				continue
			}
			ln.groups.addPath(from, l, xc, lw)
		}
		ln.groups.close(c0)
	}
	ln.groups.done()
	return ln.maximise(ln.guess())
}

// crossings is how often exposures xs cross hypothesis h.
func crossings(xs []xent, h int32) float64 {
	x := 0.0
	for _, e := range xs {
		if e.h == h {
			x += e.x
		}
	}
	return x
}

// guess is a rate at or above the best: every lost probe of the flows
// that cross the hypothesis put on it, over the probes expected to
// cross it.
func (ln *line) guess() float64 {
	fl, gr := &ln.flows, &ln.groups
	lost, sent := 0.0, ln.clean
	for i := range fl.k {
		lost += fl.cnt[i] * fl.k[i]
		for j := fl.start[i]; j < fl.start[i+1]; j++ {
			sent += fl.cnt[i] * fl.n[i] * fl.x[j] * math.Exp(fl.logw[j])
		}
	}
	for i := range gr.n {
		for j := gr.start[i]; j < gr.start[i+1]; j++ {
			sent += gr.cnt[i] * gr.n[i] * gr.x[j] * math.Exp(gr.logw[j])
		}
	}
	if sent <= 0 {
		return maxRate
	}
	return min(lost/sent, maxRate)
}

// logAddExp is log(e^a + e^b).
func logAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// eval returns the line's log-likelihood at q (up to a constant) and
// its first two derivatives.
func (ln *line) eval(q float64) (f, d1, d2 float64) {
	fl, gr := &ln.flows, &ln.groups
	f, d1 = -ln.clean*q, -ln.clean
	for i := range fl.k {
		k, n, c0, cnt := fl.k[i], fl.n[i], fl.c0[i], fl.cnt[i]
		a, b := fl.start[i], fl.start[i+1]
		if b-a == 1 && math.IsInf(c0, -1) {
			lam, x := fl.lam0[a]+q*fl.x[a], fl.x[a]
			f += cnt * (k*math.Log(n*lam) - n*lam)
			d1 += cnt * x * (k/lam - n)
			d2 -= cnt * k * x * x / (lam * lam)
			continue
		}
		best := c0
		for j := a; j < b; j++ {
			lam := fl.lam0[j] + q*fl.x[j]
			best = max(best, fl.logw[j]+k*math.Log(n*lam)-n*lam)
		}
		sum := math.Exp(c0 - best)
		var m1, m2, h float64
		for j := a; j < b; j++ {
			lam, x := fl.lam0[j]+q*fl.x[j], fl.x[j]
			w := math.Exp(fl.logw[j] + k*math.Log(n*lam) - n*lam - best)
			g := x * (k/lam - n)
			sum += w
			m1 += w * g
			m2 += w * g * g
			h -= w * k * x * x / (lam * lam)
		}
		m1, m2, h = m1/sum, m2/sum, h/sum
		f += cnt * (best + math.Log(sum))
		d1 += cnt * m1
		d2 += cnt * (h + m2 - m1*m1)
	}
	for i := range gr.n {
		n, cnt, c0 := gr.n[i], gr.cnt[i], gr.c0[i]
		a, b := gr.start[i], gr.start[i+1]
		best := c0
		for j := a; j < b; j++ {
			best = max(best, gr.logw[j]-n*(gr.lam0[j]+q*gr.x[j]))
		}
		sum := math.Exp(c0 - best)
		var m1, m2 float64
		for j := a; j < b; j++ {
			w := math.Exp(gr.logw[j] - n*(gr.lam0[j]+q*gr.x[j]) - best)
			g := -n * gr.x[j]
			sum += w
			m1 += w * g
			m2 += w * g * g
		}
		m1, m2 = m1/sum, m2/sum
		f += cnt * (best + math.Log(sum))
		d1 += cnt * m1
		d2 += cnt * (m2 - m1*m1)
	}
	return f, d1, d2
}

// maxRate bounds a fitted rate: a loss of 1 - e^-8, all but 3 in 10,000.
const maxRate = 8.0

// maximise finds the rate in [0, maxRate] where the line's slope crosses
// zero going down from a positive slope at 0, by Newton's method from
// guess, kept in a shrinking bracket, and the gain over rate 0. A slope
// at 0 that is not positive gains nothing.
func (ln *line) maximise(guess float64) (float64, float64) {
	f0, d0, _ := ln.eval(0)
	if d0 <= 0 {
		return 0, 0
	}
	lo, hi := 0.0, maxRate
	q := min(max(guess, 1e-7), maxRate)
	for range 100 {
		_, d1, d2 := ln.eval(q)
		if d1 > 0 {
			lo = q
		} else {
			hi = q
		}
		next := q - d1/d2
		if d2 >= 0 || next <= lo || next >= hi {
			next = (lo + hi) / 2
			if hi == maxRate && lo > 0 {
				next = min(2*lo, maxRate) // above every guess: climb fast
			}
		}
		if math.Abs(next-q) <= 1e-9+1e-6*q || hi-lo <= 1e-9+1e-6*lo {
			q = next
			break
		}
		q = next
	}
	f, _, _ := ln.eval(q)
	return q, f - f0
}
