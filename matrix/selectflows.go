package matrix

import (
	"math"
	"slices"
)

// What each flow crosses of the selector's hypotheses: per lossy flow one
// by one (deduplicated), the clean flows from their sums, and the
// mixtures of the paths no trace shows.

// expose adds to s.buf what the links of seq cross: each link's
// hypothesis, its ends' host hypotheses, and with devices set, the
// device it enters and the device it leaves when seq did not enter that
// device just before (a silent hop, or the start; prev is the device the
// path reached before seq, or -1). It returns the device seq ends at,
// or -1.
func (s *selector) expose(r *round, seq []int32, prev int32, devices bool) int32 {
	for _, l := range seq {
		if l < 0 {
			prev = -1
			continue
		}
		ft := &s.feeds[l]
		if ft.any {
			s.add(ft.link, 1)
			s.add(ft.hostFrom, 1)
			s.add(ft.hostTo, 1)
			if devices {
				s.add(ft.devTo, 1)
				if ft.from != prev {
					s.add(ft.devFrom, 1)
				}
			}
		}
		prev = ft.to
	}
	return prev
}

// feed is what one link feeds: its link hypothesis, its ends' host
// hypotheses (when it is their own link), the device hypotheses of the
// device it enters and of the one it leaves, -1 for none; and its ends.
// A round crosses tens of millions of links: one lookup each.
type feed struct {
	link, hostFrom, hostTo, devTo, devFrom int32
	from, to                               int32
	any                                    bool
}

// setFeeds fills s.feeds from the hypotheses.
func (s *selector) setFeeds(r *round) {
	s.feeds = slices.Grow(s.feeds[:0], len(r.links))[:len(r.links)]
	for l, lk := range r.links {
		ft := feed{link: s.linkHypo[l], hostFrom: s.hostLinkHypo(r, lk.from, lk.to), hostTo: s.hostLinkHypo(r, lk.to, lk.from),
			devTo: s.devHypo[lk.to], devFrom: s.devHypo[lk.from], from: lk.from, to: lk.to}
		ft.any = ft.link >= 0 || ft.hostFrom >= 0 || ft.hostTo >= 0 || ft.devTo >= 0 || ft.devFrom >= 0
		s.feeds[l] = ft
	}
}

func (s *selector) add(h int32, x float64) {
	if h < 0 {
		return
	}
	for i := range s.buf {
		if s.buf[i].h == h {
			s.buf[i].x += x
			return
		}
	}
	s.buf = append(s.buf, xent{h, x})
}

// mixture returns whether mixture id's paths cross a hypothesis, filling
// its exposures on first use. A reply's middle runs from the target's
// switch to the source's: the devices it crosses are those it enters but
// the last (the source's switch, counted with the access links).
func (s *selector) mixture(r *round, e *estimator, id int32) bool {
	if s.mixTouch[id] != 0 {
		return s.mixTouch[id] == 1
	}
	save := s.buf // the caller's: mixture fills its own
	s.buf = s.mbuf[:0]
	defer func() { s.mbuf, s.buf = s.buf, save }()
	comps := e.components(r, id)
	w := s.mixW[id][:0]
	lw := s.mixLogW[id][:0]
	xs := s.mixX[id][:0]
	touch := false
	for _, c := range comps {
		s.buf = s.buf[:0]
		s.expose(r, c.links, -1, false)
		for i, l := range c.links {
			if i < len(c.links)-1 {
				s.add(s.devHypo[r.links[l].to], 1)
			}
		}
		touch = touch || len(s.buf) > 0
		w, lw = append(w, c.w), append(lw, math.Log(c.w))
		xs = append(xs, s.keep())
	}
	if s.spread > 0 && len(comps) > 1 {
		// Replies spread per probe: one more path, the paths' average.
		s.buf = s.buf[:0]
		for c, cx := range xs {
			for _, x := range cx {
				s.add(x.h, w[c]*x.x)
			}
		}
		for c := range w {
			w[c] *= 1 - s.spread
			lw[c] = math.Log(w[c])
		}
		w, lw = append(w, s.spread), append(lw, math.Log(s.spread))
		xs = append(xs, s.keep())
	}
	s.mixW[id], s.mixLogW[id], s.mixX[id] = w, lw, xs
	s.mixTouch[id] = 2
	if touch {
		s.mixTouch[id] = 1
	}
	return touch
}

// keep copies s.buf into the arena, for a mixture path's exposures.
func (s *selector) keep() []xent {
	s.arena = append(s.arena, s.buf...)
	return s.arena[len(s.arena)-len(s.buf) : len(s.arena) : len(s.arena)]
}

// reverseExposure adds to s.buf what a reply crosses for certain: the
// access links up from the target and down to the source, and the
// switches at both ends of the middle.
func (s *selector) reverseExposure(r *round, rp *reversePath) {
	s.expose(r, rp.up[:rp.nUp], -1, false)
	s.expose(r, rp.down[:rp.nDown], -1, false)
	s.add(s.devHypo[rp.swDst], 1)
	if rp.swSrc != rp.swDst {
		s.add(s.devHypo[rp.swSrc], 1)
	}
}

// collect computes the exposure to the hypotheses of every lossy flow,
// one by one, and of the clean flows, from their sums (cleanSums).
func (s *selector) collect(r *round, e *estimator) {
	nh := len(s.hs)
	s.setFeeds(r)
	s.flows, s.xs, s.groups = s.flows[:0], s.xs[:0], s.groups[:0]
	if s.flowHash == nil {
		s.flowHash = map[uint64]int32{}
	}
	clear(s.flowHash)
	s.clean = resize(s.clean, nh)
	nm := len(r.mixes)
	s.mixTouch = resize(s.mixTouch, nm)
	s.mixW = slices.Grow(s.mixW[:0], nm)[:nm]
	s.mixLogW = slices.Grow(s.mixLogW[:0], nm)[:nm]
	s.mixX = slices.Grow(s.mixX[:0], nm)[:nm]
	s.arena = s.arena[:0]

	c := &e.clean
	add := func(h int32, x float64, flows int32) {
		if h >= 0 {
			s.clean[h] += x
			s.hs[h].clean += flows
		}
	}
	for l := range r.links {
		ft := &s.feeds[l]
		if !ft.any {
			continue
		}
		linear, flows := c.fwd[l]+c.acc[l], e.cleanFlows[l]
		add(ft.link, linear, flows)
		add(ft.hostFrom, linear, flows)
		add(ft.hostTo, linear, flows)
		add(ft.devTo, c.fwd[l], flows)
		add(ft.devFrom, c.start[l], 0)
	}
	for d, h := range s.devHypo {
		add(h, c.sw[d], 0)
	}
	for _, g := range c.groups {
		if s.mixture(r, e, g.mix) {
			s.groups = append(s.groups, g)
		}
	}

	lastPair := int32(-1)
	var rev reversePath
	var revX []xent
	revMix := int32(-1)
	for _, fi := range e.lossy {
		f := &r.flows[fi]
		hasRev := r.isHost(f.dst)
		if hasRev && f.pair != lastPair {
			lastPair = f.pair
			rev = e.reverse(r, f.src, f.dst)
			s.buf = revX[:0]
			if rev.known() {
				s.reverseExposure(r, &rev)
			}
			revX = s.buf
			revMix = -1
			if rev.mix >= 0 && s.mixture(r, e, rev.mix) {
				revMix = rev.mix
			}
		}
		links := r.flowLinks[f.linkStart:f.linkEnd]
		if r.middleGap(links) {
			continue
		}
		mix := int32(-1)
		if hasRev {
			mix = revMix
		}
		s.buf = s.fbuf[:0]
		s.expose(r, links, -1, true)
		if hasRev {
			for _, x := range revX {
				s.add(x.h, x.x)
			}
		}
		s.fbuf = s.buf
		if len(s.buf) == 0 && mix < 0 {
			continue
		}
		for _, x := range s.buf {
			s.hs[x.h].lossy++
		}
		s.addFlow(float64(f.sent), float64(f.lost), mix)
	}
	s.index()
}

// addFlow adds a lossy flow crossing s.buf, or counts it in one alike.
func (s *selector) addFlow(n, k float64, mix int32) {
	hash := uint64(n)*0x9E3779B97F4A7C15 ^ uint64(k)*0xC2B2AE3D27D4EB4F ^ uint64(uint32(mix))*0x165667B19E3779F9
	for _, x := range s.buf {
		hash = (hash ^ uint64(x.h) ^ math.Float64bits(x.x)<<7) * 0x100000001B3
	}
	head, ok := s.flowHash[hash]
	for j := head; ok && j >= 0; j = s.flows[j].next {
		g := &s.flows[j]
		if g.n == n && g.k == k && g.mix == mix && slices.Equal(s.xs[g.xs:g.xe], s.buf) {
			g.cnt++
			return
		}
	}
	next := int32(-1)
	if ok {
		next = head
	}
	start := int32(len(s.xs))
	s.xs = append(s.xs, s.buf...)
	s.flowHash[hash] = int32(len(s.flows))
	s.flows = append(s.flows, sflow{n: n, k: k, cnt: 1, xs: start, xe: int32(len(s.xs)), mix: mix, next: next})
}

// index builds the per-hypothesis lists of lossy flows and clean groups.
func (s *selector) index() {
	nh := len(s.hs)
	seen := make([]int32, nh)
	for i := range seen {
		seen[i] = -1
	}
	touch := func(fi int32, mix int32, xs []xent, visit func(h int32)) {
		for _, x := range xs {
			if seen[x.h] != fi {
				seen[x.h] = fi
				visit(x.h)
			}
		}
		if mix >= 0 {
			for _, c := range s.mixX[mix] {
				for _, x := range c {
					if seen[x.h] != fi {
						seen[x.h] = fi
						visit(x.h)
					}
				}
			}
		}
	}
	s.hfStart = resize(s.hfStart, nh+1)
	for fi := range s.flows {
		f := &s.flows[fi]
		touch(int32(fi), f.mix, s.xs[f.xs:f.xe], func(h int32) { s.hfStart[h+1]++ })
	}
	for h := range nh {
		s.hfStart[h+1] += s.hfStart[h]
	}
	s.hf = resize(s.hf, int(s.hfStart[nh]))
	pos := slices.Clone(s.hfStart[:nh])
	clear(seen)
	for i := range seen {
		seen[i] = -1
	}
	for fi := range s.flows {
		f := &s.flows[fi]
		touch(int32(fi), f.mix, s.xs[f.xs:f.xe], func(h int32) { s.hf[pos[h]] = int32(fi); pos[h]++ })
	}
	for i := range seen {
		seen[i] = -1
	}
	s.hgStart = resize(s.hgStart, nh+1)
	for gi := range s.groups {
		touch(int32(gi), s.groups[gi].mix, nil, func(h int32) { s.hgStart[h+1]++ })
	}
	for h := range nh {
		s.hgStart[h+1] += s.hgStart[h]
	}
	s.hg = resize(s.hg, int(s.hgStart[nh]))
	copy(pos, s.hgStart[:nh])
	for i := range seen {
		seen[i] = -1
	}
	for gi := range s.groups {
		touch(int32(gi), s.groups[gi].mix, nil, func(h int32) { s.hg[pos[h]] = int32(gi); pos[h]++ })
	}
}
