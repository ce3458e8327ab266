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
	k, n, c0, cnt []float64 // per lossy flow; c0 the constant paths' log-likelihood, or -Inf; cnt how many flows alike
	start         []int32   // per lossy flow, its first varying path; len(k)+1
	lam0, x, logw []float64 // per varying path
	gn, gcount    []float64 // per group
	g0            []float64
	gstart        []int32
	gmu0, gx, glw []float64
	clean         float64
	wx, ww        []float64 // solve's scratch
	// Flows and groups alike in everything the line reads are one
	// entry with a count: before any hypothesis is chosen a spine's
	// line has a handful of distinct entries among 80,000 flows.
	flowKey  map[lineKey]int32
	groupKey map[lineKey]int32
}

// lineKey is an entry of a line with at most two varying paths.
type lineKey struct {
	k, n, c0      float64
	np            int
	lam0, x, logw [2]float64
}

func (ln *line) reset(clean float64) {
	ln.k, ln.n, ln.c0, ln.cnt, ln.start = ln.k[:0], ln.n[:0], ln.c0[:0], ln.cnt[:0], ln.start[:0]
	ln.lam0, ln.x, ln.logw = ln.lam0[:0], ln.x[:0], ln.logw[:0]
	ln.gn, ln.gcount, ln.g0, ln.gstart = ln.gn[:0], ln.gcount[:0], ln.g0[:0], ln.gstart[:0]
	ln.gmu0, ln.gx, ln.glw = ln.gmu0[:0], ln.gx[:0], ln.glw[:0]
	ln.clean = clean
	if ln.flowKey == nil {
		ln.flowKey, ln.groupKey = map[lineKey]int32{}, map[lineKey]int32{}
	}
	clear(ln.flowKey)
	clear(ln.groupKey)
}

// open starts a lossy flow's entry; its varying paths follow (addPath),
// then close.
func (ln *line) open(k, n, cnt float64) int {
	ln.k, ln.n, ln.cnt, ln.start = append(ln.k, k), append(ln.n, n), append(ln.cnt, cnt), append(ln.start, int32(len(ln.lam0)))
	return len(ln.lam0)
}

// close ends the entry open started, with the constant paths' c0, and
// merges it into an earlier one alike.
func (ln *line) close(c0 float64) {
	i := len(ln.k) - 1
	from := int(ln.start[i])
	ln.c0 = append(ln.c0, c0)
	np := len(ln.lam0) - from
	if np > 2 {
		return
	}
	key := lineKey{k: ln.k[i], n: ln.n[i], c0: c0, np: np}
	copy(key.lam0[:], ln.lam0[from:])
	copy(key.x[:], ln.x[from:])
	copy(key.logw[:], ln.logw[from:])
	if j, ok := ln.flowKey[key]; ok {
		ln.cnt[j] += ln.cnt[i]
		ln.k, ln.n, ln.c0, ln.cnt, ln.start = ln.k[:i], ln.n[:i], ln.c0[:i], ln.cnt[:i], ln.start[:i]
		ln.lam0, ln.x, ln.logw = ln.lam0[:from], ln.x[:from], ln.logw[:from]
		return
	}
	ln.flowKey[key] = int32(i)
}

// gopen and gclose are open and close for a clean group.
func (ln *line) gopen(n, count float64) int {
	ln.gn, ln.gcount, ln.gstart = append(ln.gn, n), append(ln.gcount, count), append(ln.gstart, int32(len(ln.gmu0)))
	return len(ln.gmu0)
}

func (ln *line) gclose(c0 float64) {
	i := len(ln.gn) - 1
	from := int(ln.gstart[i])
	ln.g0 = append(ln.g0, c0)
	np := len(ln.gmu0) - from
	if np > 2 {
		return
	}
	key := lineKey{n: ln.gn[i], c0: c0, np: np}
	copy(key.lam0[:], ln.gmu0[from:])
	copy(key.x[:], ln.gx[from:])
	copy(key.logw[:], ln.glw[from:])
	if j, ok := ln.groupKey[key]; ok {
		ln.gcount[j] += ln.gcount[i]
		ln.gn, ln.gcount, ln.g0, ln.gstart = ln.gn[:i], ln.gcount[:i], ln.g0[:i], ln.gstart[:i]
		ln.gmu0, ln.gx, ln.glw = ln.gmu0[:from], ln.gx[:from], ln.glw[:from]
		return
	}
	ln.groupKey[key] = int32(i)
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
		from := ln.open(f.k, f.n, f.cnt)
		if f.mix < 0 {
			ln.addPath(from, base, xa, 0)
			ln.close(math.Inf(-1))
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
				ln.lam0, ln.x, ln.logw = append(ln.lam0, base), append(ln.x, xc), append(ln.logw, math.Log(ln.ww[i]))
			}
			if w0 > 0 {
				c0 = math.Log(w0) + f.k*math.Log(f.n*base) - f.n*base
			}
			ln.close(c0)
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
			ln.addPath(from, l, xc, lw)
		}
		ln.close(c0)
	}
	ln.start = append(ln.start, int32(len(ln.lam0)))
	for _, gi := range s.hg[s.hgStart[h]:s.hgStart[h+1]] {
		g := &s.groups[gi]
		from := ln.gopen(g.n, g.count)
		c0 := math.Inf(-1)
		if !s.gtouched[gi] {
			w0 := 0.0
			for c, xs := range s.mixX[g.mix] {
				if xc := crossings(xs, h); xc != 0 {
					ln.addGroupPath(from, 0, xc, s.mixLogW[g.mix][c])
				} else {
					w0 += s.mixW[g.mix][c]
				}
			}
			if w0 > 0 {
				c0 = math.Log(w0)
			}
			ln.gclose(c0)
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
			ln.addGroupPath(from, l, xc, lw)
		}
		ln.gclose(c0)
	}
	ln.gstart = append(ln.gstart, int32(len(ln.gmu0)))
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

// addPath adds a varying reply path to the flow whose paths start at
// from, merged with one that has the same rate and crossings: with one
// hypothesis chosen or none, most of a flow's paths are alike.
func (ln *line) addPath(from int, lam, x, lw float64) {
	for j := from; j < len(ln.lam0); j++ {
		if ln.lam0[j] == lam && ln.x[j] == x {
			ln.logw[j] = logAddExp(ln.logw[j], lw)
			return
		}
	}
	ln.lam0, ln.x, ln.logw = append(ln.lam0, lam), append(ln.x, x), append(ln.logw, lw)
}

func (ln *line) addGroupPath(from int, mu, x, lw float64) {
	for j := from; j < len(ln.gmu0); j++ {
		if ln.gmu0[j] == mu && ln.gx[j] == x {
			ln.glw[j] = logAddExp(ln.glw[j], lw)
			return
		}
	}
	ln.gmu0, ln.gx, ln.glw = append(ln.gmu0, mu), append(ln.gx, x), append(ln.glw, lw)
}

// guess is a rate at or above the best: every lost probe of the flows
// that cross the hypothesis put on it, over the probes expected to
// cross it.
func (ln *line) guess() float64 {
	lost, sent := 0.0, ln.clean
	for i := range ln.k {
		lost += ln.cnt[i] * ln.k[i]
		for j := ln.start[i]; j < ln.start[i+1]; j++ {
			sent += ln.cnt[i] * ln.n[i] * ln.x[j] * math.Exp(ln.logw[j])
		}
	}
	for i := range ln.gn {
		for j := ln.gstart[i]; j < ln.gstart[i+1]; j++ {
			sent += ln.gcount[i] * ln.gn[i] * ln.gx[j] * math.Exp(ln.glw[j])
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
	f, d1 = -ln.clean*q, -ln.clean
	for i := range ln.k {
		k, n, c0, cnt := ln.k[i], ln.n[i], ln.c0[i], ln.cnt[i]
		a, b := ln.start[i], ln.start[i+1]
		if b-a == 1 && math.IsInf(c0, -1) {
			lam, x := ln.lam0[a]+q*ln.x[a], ln.x[a]
			f += cnt * (k*math.Log(n*lam) - n*lam)
			d1 += cnt * x * (k/lam - n)
			d2 -= cnt * k * x * x / (lam * lam)
			continue
		}
		best := c0
		for j := a; j < b; j++ {
			lam := ln.lam0[j] + q*ln.x[j]
			best = max(best, ln.logw[j]+k*math.Log(n*lam)-n*lam)
		}
		sum := math.Exp(c0 - best)
		var m1, m2, h float64
		for j := a; j < b; j++ {
			lam, x := ln.lam0[j]+q*ln.x[j], ln.x[j]
			w := math.Exp(ln.logw[j] + k*math.Log(n*lam) - n*lam - best)
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
	for i := range ln.gn {
		n, cnt, c0 := ln.gn[i], ln.gcount[i], ln.g0[i]
		a, b := ln.gstart[i], ln.gstart[i+1]
		best := c0
		for j := a; j < b; j++ {
			best = max(best, ln.glw[j]-n*(ln.gmu0[j]+q*ln.gx[j]))
		}
		sum := math.Exp(c0 - best)
		var m1, m2 float64
		for j := a; j < b; j++ {
			w := math.Exp(ln.glw[j] - n*(ln.gmu0[j]+q*ln.gx[j]) - best)
			g := -n * ln.gx[j]
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
