package matrix

import (
	"cmp"
	"math"
	"slices"
)

// The selector chooses what explains the loss: greedy model selection
// over device, link and host hypotheses, after the per-link fit
// (estimate.go) has screened for them.
//
// The per-link fit gives every link its own rate. Where links are
// collinear (between two racks, a flow's forward path and its reply's
// unknown path share most of their links) many rate vectors explain the
// data equally well, and the L1 fit picks one of them: on the lab
// cluster a lossy spine's loss spread over the clean spine's uplinks,
// and a ToR with two lossy uplinks out of four links read as a lossy
// ToR. A hypothesis ties rates together instead: a device drops at one
// rate on every packet it forwards, whichever links it uses; a host's
// NIC at one rate on its own links, both ways; a link on itself alone.
// A ToR whose links to the clean spine and to its hosts are clean cannot
// explain the data, however the per-link fit spread it.
//
// The likelihood is the estimator's (a flow's lost probes are Poisson
// with mean sent times the sum of the rates along its path), with every
// path also losing Healthy, and with what no trace shows as what it is:
// a flow's reply takes one of the mixture's paths, the same for all its
// probes, and so does its forward middle where the spine did not answer.
// A flow's likelihood is the mixture of the likelihoods over those
// paths, not the likelihood of their average: a flow whose forward path
// is clean and that lost 3 of 60 probes is one whose reply crossed the
// lossy spine, which the average spread over both spines. Clean flows
// enter by sums (their forward path and access links add linearly;
// only a mixture does not, and clean flows with the same mixtures and
// probe count share it), so the cost is in the lossy flows.
//
// The hypotheses are the per-link fit's lossy links (screened at p <
// sqrt(Alpha)), their ends, the links between switches of each such
// device (the fit may have put a link's loss on another that carries the
// same flows), and the hosts the host rule names. Selection is greedy
// forward, the fewest faults that explain the loss as in Boolean
// tomography: each step fits the maxTried hypotheses whose likelihood
// rises fastest from their current rate, one at a time with the chosen
// held, and takes the one that gains the most. The first must gain half
// of log(1/Alpha) nats, each further one log(1/Alpha): what the model
// misses of a large fault (a black hole's all-or-nothing flows, a
// reply's path off its sampled shares) leaves residue that hypotheses
// near it explain in part. A chosen one must also lose significantly
// more than Healthy, and score MinScore beside those chosen before it;
// the chosen are then refitted together.
//
// A hypothesis that gained within tieNats of the one chosen, and gains
// less than the first's threshold once it is chosen, explains the same
// loss: it is named beside it, sharing its score (two links that every
// flow crosses together). A host is named for its own link:
// every flow that crosses a host's link one way crosses the other on
// the way back, so in and out are told apart by a few flows at most: the
// link is named alone only when it explains the loss better by what a
// second fault needs, as a NIC or a cable fails both ways.
//
// The first chosen also ties with its siblings, what sits in its place
// on the other paths between two switches (the other spines, their
// links), when one gains within the first's threshold of it and nothing
// once it is chosen. A reply's path is the one thing no trace shows: on
// few flows, a lossy spine's loss on the replies of flows whose forward
// path crosses the other spine reads as the other spine's, by a few
// nats. The switches on lossy flows' reply paths are weighed for this
// even where the per-link fit found none of their links lossy, as
// rivals only: named on their own they would take a large fault's
// residue.
type selector struct {
	bg    float64 // every path's loss rate: Thresholds.Healthy
	alpha float64 // Thresholds.Alpha
	// spread is the prior share of flows whose replies take a path of
	// their mixture per probe rather than per flow (replySpread).
	spread float64

	hs       []hypo
	devHypo  []int32 // per device: its device hypothesis, or -1
	hostHypo []int32 // per device: its host hypothesis, or -1
	linkHypo []int32 // per link: its link hypothesis, or -1

	// Lossy flows that cross a hypothesis: their certain exposures
	// (forward path, access links) in xs, and the mixture of their reply
	// if its paths differ in what they cross.
	flows    []sflow
	xs       []xent
	flowHash map[uint64]int32 // the first of the flows with a hash
	// Clean flows: linear exposure per hypothesis, and per (mixture,
	// probes) the number of clean flows whose reply it is.
	clean  []float64
	groups []cleanGroup

	// Per mixture: whether its paths cross a hypothesis (0 unknown, 1
	// yes, 2 no), each path's log share and exposures.
	mixTouch []uint8
	mixW     [][]float64
	mixLogW  [][]float64
	mixX     [][][]xent

	// Per hypothesis, the lossy flows and clean groups it touches (CSR).
	hfStart, hf []int32
	hgStart, hg []int32

	feeds      []feed    // per link
	succ, pred []int32   // hypotheses' scratch: per link, the one link lossy flows take next or came from (-2: several)
	arena      []xent    // storage of mixX
	q          []float64 // rates: nonzero only for chosen hypotheses
	// touched and gtouched mark the lossy flows and clean groups that a
	// chosen hypothesis touches.
	touched, gtouched []bool
	buf               []xent // what expose and add fill
	fbuf              []xent // a flow's exposures, kept between flows for its storage
	mbuf              []xent // mixture's

	// line is one hypothesis's 1-D problem with the others held.
	line line

	// disputes are the chosen links the sources' word refused (dispute).
	disputes []disputed
}

// hypo is one hypothesis: a device, a host's own links, or a link.
type hypo struct {
	kind string
	id   int32 // the device, or the link
	// rank is the per-link fit's excess loss on the hypothesis's links,
	// which orders hypotheses that the data scores the same.
	rank float64

	lossy, clean int32 // flows whose forward or access links cross it
	chosen       bool
	rival        bool    // weighed only as the first chosen's rival
	tieOf        int32   // the chosen hypothesis it ties with, or -1
	lost, sent   float64 // attributed lost probes, probes through it
}

type xent struct {
	h int32
	x float64 // how many times the path crosses it
}

// sflow is one lossy flow, or cnt alike: the same probes sent and lost,
// crossing the same hypotheses, with the same reply mixture.
type sflow struct {
	n, k, cnt float64
	xs, xe    int32
	mix       int32
	next      int32 // the next flow with the same hash, or -1
}

// tieNats is how close to the best gain another hypothesis must come to
// be named beside it: a likelihood ratio of e. Two links that carry the
// same flows gain the same to rounding.
const tieNats = 1.0

// maxChosen bounds the faults one round names.
const maxChosen = 8

// maxTried bounds the hypotheses fitted per step, the most promising
// first (by the likelihood's slope at zero): at 5,000 nodes a lossy
// spine's links make every ToR and spine a hypothesis, and each spine
// is in every reply's mixture.
const maxTried = 12

// hypotheses lists what may explain the per-link fit's bad links: each
// bad link and its ends (a device, or a host's own links). No VIP: only
// the lb rule judges it.
func (s *selector) hypotheses(r *round, e *estimator, bad []bool, hosts []int32, th *Thresholds) {
	nd, nl := len(r.devName), len(r.links)
	s.hs = s.hs[:0]
	s.devHypo = fill(s.devHypo, nd, -1)
	s.hostHypo = fill(s.hostHypo, nd, -1)
	s.linkHypo = fill(s.linkHypo, nl, -1)
	addDev := func(d int32) {
		switch {
		case r.devLB[d]:
		case r.devHost[d]:
			if s.hostHypo[d] < 0 {
				s.hostHypo[d] = int32(len(s.hs))
				s.hs = append(s.hs, hypo{kind: KindHost, id: d, tieOf: -1})
			}
		case s.devHypo[d] < 0:
			s.devHypo[d] = int32(len(s.hs))
			s.hs = append(s.hs, hypo{kind: KindDevice, id: d, tieOf: -1})
		}
	}
	addLink := func(l int32) {
		if s.linkHypo[l] < 0 {
			s.linkHypo[l] = int32(len(s.hs))
			s.hs = append(s.hs, hypo{kind: KindLink, id: l, tieOf: -1})
		}
	}
	for l, lk := range r.links {
		if !bad[l] || r.devLB[lk.from] || r.devLB[lk.to] {
			continue
		}
		addLink(int32(l))
		addDev(lk.from)
		addDev(lk.to)
	}
	// The switches a lossy flow's reply may cross, as rivals of the
	// first chosen: the per-link fit weighs a reply's path by its share
	// and a forward link in full, so where few flows crossed the lossy
	// spine forward, its loss on replies lands on the other spine's
	// links, and the lossy spine would never be weighed.
	mixSeen := map[int32]bool{}
	for _, fi := range e.lossy {
		f := &r.flows[fi]
		if !slices.ContainsFunc(r.flowLinks[f.linkStart:f.linkEnd], func(l int32) bool { return bad[l] }) {
			continue
		}
		rev := e.reverse(r, f.src, f.dst)
		if rev.mix < 0 || mixSeen[rev.mix] {
			continue
		}
		mixSeen[rev.mix] = true
		for _, l := range r.mixes[rev.mix].links {
			for _, d := range [...]int32{r.links[l].from, r.links[l].to} {
				if r.isSwitch(d) && s.devHypo[d] < 0 && !r.devLB[d] {
					addDev(d)
					s.hs[s.devHypo[d]].rival = true
				}
			}
		}
	}
	// A rule's host is weighed only on its own links (hostLinkHypo):
	// links to its pods alone, all a silent fabric shows of a node,
	// cannot clear its NIC.
	for _, d := range hosts {
		for l, lk := range r.links {
			if e.sent[l] > 0 && (lk.from == d && r.devAcc[lk.to] != d || lk.to == d && r.devAcc[lk.from] != d) {
				addDev(d)
				break
			}
		}
	}
	// A lossy link's twins: the link every lossy flow through it takes
	// next, or came from, when that link's flows all came from it, or
	// take it next (between two racks, tor1->spine2 and spine2->tor2).
	// The fit may have put their loss on either; the selector can only
	// name what it weighs, and names both, tied, when the data cannot
	// tell them apart.
	s.succ, s.pred = fill(s.succ, nl, -1), fill(s.pred, nl, -1)
	note := func(at []int32, l, next int32) {
		switch at[l] {
		case -1:
			at[l] = next
		case next:
		default:
			at[l] = -2
		}
	}
	for _, fi := range e.lossy {
		f := &r.flows[fi]
		links := r.flowLinks[f.linkStart:f.linkEnd]
		for i := 1; i < len(links); i++ {
			a, b := links[i-1], links[i]
			la, lb := r.links[a], r.links[b]
			if la.to == lb.from && r.isSwitch(la.from) && r.isSwitch(la.to) && r.isSwitch(lb.to) {
				note(s.succ, a, b)
				note(s.pred, b, a)
			}
		}
	}
	for l := range r.links {
		if s.linkHypo[l] < 0 || !bad[l] {
			continue
		}
		if n := s.succ[l]; n >= 0 && s.pred[n] == int32(l) {
			addLink(n)
		}
		if p := s.pred[l]; p >= 0 && s.succ[p] == int32(l) {
			addLink(p)
		}
	}
	// Rank by the per-link fit's excess on each hypothesis's links.
	for l, lk := range r.links {
		ex := max(e.lost[l]-th.Healthy*e.sent[l], 0)
		if ex == 0 {
			continue
		}
		for _, h := range [...]int32{s.linkHypo[l], s.devHypo[lk.to], s.devHypo[lk.from], s.hostLinkHypo(r, lk.from, lk.to), s.hostLinkHypo(r, lk.to, lk.from)} {
			if h >= 0 {
				s.hs[h].rank += ex
			}
		}
	}
}

// hostLinkHypo is the host hypothesis of h that link (h, other) or
// (other, h) feeds, or -1: a host's own links, not those to its pods
// (a pod's node is its access device), which cross the pod's veth and
// not the host's NIC.
func (s *selector) hostLinkHypo(r *round, h, other int32) int32 {
	if x := s.hostHypo[h]; x >= 0 && r.devAcc[other] != h {
		return x
	}
	return -1
}

// choose runs the greedy selection; minGain is the least log-likelihood
// gain that adds a hypothesis.
func (s *selector) choose(r *round, th *Thresholds, minGain float64) {
	nh := len(s.hs)
	s.q = resize(s.q, nh)
	slope := make([]float64, nh)
	order := make([]int32, 0, nh)
	var chosen []int32
	total := 0.0 // the chosen hypotheses' excess loss
	s.touched = resize(s.touched, len(s.flows))
	s.gtouched = resize(s.gtouched, len(s.groups))
	for len(chosen) < maxChosen {
		s.slopes(slope)
		order = order[:0]
		for h := range nh {
			if !s.hs[h].chosen && !s.hs[h].rival && s.hs[h].tieOf < 0 && slope[h] > 0 {
				order = append(order, int32(h))
			}
		}
		slices.SortFunc(order, func(a, b int32) int { return cmp.Or(cmp.Compare(slope[b], slope[a]), cmp.Compare(a, b)) })
		if len(order) > maxTried {
			order = order[:maxTried]
		}
		best, bestGain := int32(-1), 0.0
		gains := make([]float64, len(order))
		qs := make([]float64, len(order))
		for i, h := range order {
			qs[i], gains[i] = s.solve(h)
			if gains[i] > bestGain+1e-9 || best >= 0 && math.Abs(gains[i]-bestGain) <= 1e-9 && s.better(h, best) {
				best, bestGain = h, gains[i]
			}
		}
		// A second fault beside the first must be twice as sure: what
		// the model misses of the first (a black hole's all-or-nothing
		// flows, a reply's path off its sampled shares) leaves residue
		// that a hypothesis near it explains in part.
		need := minGain * float64(min(len(chosen)+1, 2))
		if best >= 0 && s.nearChosen(r, best, chosen) {
			need *= 2
		}
		if best < 0 || bestGain < need {
			break
		}
		// A host is named for one of its own links unless the link
		// explains the loss significantly better (by what a second
		// fault needs): every flow that crosses a host's link one way
		// crosses the other on the way back, so in and out are told
		// apart by a few flows at most, and a NIC or a cable fails
		// both.
		if hy := &s.hs[best]; hy.kind == KindLink {
			for i, h := range order {
				if gains[i] >= bestGain-2*minGain && s.hs[h].kind == KindHost && s.owns(r, h, hy.id) {
					best = h
					break
				}
			}
		}
		i := slices.Index(order, best)
		var rivals []int32
		if len(chosen) == 0 {
			rivals = s.rivals(r, best, gains[i]-minGain, order, gains)
		}
		s.q[best] = qs[i]
		lost, sent := s.attribute(best)
		// Not significant, or too small beside what is chosen to score
		// MinScore: the scatter around a large fault (a black hole's
		// flows are all-or-nothing, which no rate fits exactly).
		excess := lost - th.Healthy*sent
		if ok, _ := th.significant(lost, sent); !ok || excess < th.MinScore*(total+excess) {
			s.q[best] = 0
			break
		}
		total += excess
		s.hs[best].lost, s.hs[best].sent = lost, sent
		s.hs[best].chosen = true
		chosen = append(chosen, best)
		s.mark(best)
		s.refit(chosen)
		// A hypothesis that gained about as much, and gains nothing
		// once best is chosen, explains the same loss: a tie, unless it
		// is a link of the host chosen.
		for i, h := range order {
			if h == best || gains[i] < bestGain-tieNats {
				continue
			}
			if s.hs[best].kind == KindHost && s.hs[h].kind == KindLink && s.owns(r, best, s.hs[h].id) {
				continue
			}
			if _, g := s.solve(h); g < minGain {
				s.hs[h].tieOf = best
			}
		}
		// So does the first's place on another path, within a wider
		// margin: on few flows a lossy spine's loss on replies, whose
		// path no trace shows, reads as the other spine's. (A further
		// fault is twice as sure already.)
		for _, h := range rivals {
			if s.hs[h].tieOf < 0 && !s.hs[h].chosen {
				if _, g := s.solve(h); g < minGain {
					s.hs[h].tieOf = best
				}
			}
		}
	}
	if len(chosen) > 1 { // refit moved the rates
		for _, h := range chosen {
			s.hs[h].lost, s.hs[h].sent = s.attribute(h)
		}
	}
}

// rivals lists the siblings of best that gain more than floor with
// nothing chosen.
func (s *selector) rivals(r *round, best int32, floor float64, order []int32, gains []float64) []int32 {
	var out []int32
	for _, h := range s.siblings(r, best) {
		g := 0.0
		if i := slices.Index(order, h); i >= 0 {
			g = gains[i]
		} else {
			_, g = s.solve(h)
		}
		if g > floor {
			out = append(out, h)
		}
	}
	return out
}

// siblings lists the hypotheses in best's place on the other paths
// between two switches: for a device in the middle of a mixture's path,
// the devices at its position on the other paths of that length; for a
// link, the links there and the switches at their ends.
func (s *selector) siblings(r *round, best int32) []int32 {
	hy := &s.hs[best]
	if hy.kind != KindDevice && hy.kind != KindLink {
		return nil
	}
	var out []int32
	add := func(h int32) {
		if h >= 0 && h != best && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	addDev := func(d int32) {
		// Not a link's own end: the tie rule weighs those.
		if hy.kind != KindLink || d != r.links[hy.id].from && d != r.links[hy.id].to {
			add(s.devHypo[d])
		}
	}
	for mi := range r.mixes {
		mx := &r.mixes[mi]
		// Find best's position on one of the mixture's paths.
		pos, plen := -1, 0
		start := int32(0)
		for _, end := range mx.ends {
			mid := mx.links[start:end]
			start = end
			for i, l := range mid {
				if hy.kind == KindLink && l == hy.id || hy.kind == KindDevice && i > 0 && r.links[l].from == hy.id {
					pos, plen = i, len(mid)
				}
			}
			if pos >= 0 {
				break
			}
		}
		if pos < 0 {
			continue
		}
		start = 0
		for _, end := range mx.ends {
			mid := mx.links[start:end]
			start = end
			if len(mid) != plen {
				continue
			}
			if hy.kind == KindLink {
				// A link's own, and the switches at its ends'.
				if mid[pos] == hy.id {
					continue
				}
				add(s.linkHypo[mid[pos]])
				if pos > 0 {
					addDev(r.links[mid[pos]].from)
				}
				if pos+1 < len(mid) {
					addDev(r.links[mid[pos+1]].from)
				}
			} else {
				addDev(r.links[mid[pos]].from)
			}
		}
	}
	return out
}

// nearChosen reports whether hypothesis h, a device or a link, meets a
// chosen link at a device: the chosen link's loss on replies whose path
// no trace sampled lands on the elements next to it, which must be surer
// still to be named beside it.
func (s *selector) nearChosen(r *round, h int32, chosen []int32) bool {
	meets := func(d int32, lk link) bool { return lk.from == d || lk.to == d }
	for _, c := range chosen {
		if s.hs[c].kind != KindLink {
			continue
		}
		lk := r.links[s.hs[c].id]
		switch s.hs[h].kind {
		case KindDevice:
			if meets(s.hs[h].id, lk) {
				return true
			}
		case KindLink:
			if o := r.links[s.hs[h].id]; meets(o.from, lk) || meets(o.to, lk) {
				return true
			}
		}
	}
	return false
}

// rejected reports whether the selector weighed host d and named it
// neither alone nor tied. A host whose own links no flow was traced
// across (a silent fabric, and pods on an overlay whose traces show only
// hosts) was not weighed: the rule that named it stands.
func (s *selector) rejected(d int32) bool {
	if d < 0 || d >= int32(len(s.hostHypo)) {
		return false
	}
	h := s.hostHypo[d]
	return h >= 0 && !s.hs[h].chosen && s.hs[h].tieOf < 0 && s.hs[h].lossy+s.hs[h].clean > 0
}

// owns reports whether link l is one of host hypothesis h's own links.
func (s *selector) owns(r *round, h, l int32) bool {
	d, lk := s.hs[h].id, r.links[l]
	return lk.from == d && r.devAcc[lk.to] != d || lk.to == d && r.devAcc[lk.from] != d
}

// better breaks an exact tie in gain: the hypothesis the per-link fit
// ranked higher, then the lower index.
func (s *selector) better(a, b int32) bool {
	if s.hs[a].rank != s.hs[b].rank {
		return s.hs[a].rank > s.hs[b].rank
	}
	return a < b
}

// refit fits the chosen hypotheses together, one at a time, until no
// rate moves.
func (s *selector) refit(chosen []int32) {
	if len(chosen) < 2 {
		return
	}
	for range 50 {
		delta := 0.0
		for _, h := range chosen {
			old := s.q[h]
			s.q[h] = 0
			q, _ := s.solve(h)
			s.q[h] = q
			delta = max(delta, math.Abs(q-old))
		}
		if delta < 1e-6 {
			return
		}
	}
}

// mark notes the lossy flows and clean groups that chosen hypothesis h
// touches: the others' reply paths are as likely as their shares.
func (s *selector) mark(h int32) {
	for _, fi := range s.hf[s.hfStart[h]:s.hfStart[h+1]] {
		s.touched[fi] = true
	}
	for _, gi := range s.hg[s.hgStart[h]:s.hgStart[h+1]] {
		s.gtouched[gi] = true
	}
}

// slopes sets slope[h] to the derivative of the log-likelihood in q_h at
// the current rates: how fast each hypothesis would gain.
func (s *selector) slopes(slope []float64) {
	for h := range slope {
		slope[h] = -s.clean[h]
	}
	var lam, p []float64
	for fi := range s.flows {
		f := &s.flows[fi]
		if s.touched[fi] {
			lam, p = s.posterior(f, lam, p)
		} else {
			lam, p = s.prior(f.mix, s.bg, lam, p)
		}
		for c := range lam {
			g := f.cnt * p[c] * (f.k/lam[c] - f.n)
			for _, x := range s.xs[f.xs:f.xe] {
				slope[x.h] += g * x.x
			}
			if f.mix >= 0 {
				for _, x := range s.mixX[f.mix][c] {
					slope[x.h] += g * x.x
				}
			}
		}
	}
	for gi := range s.groups {
		g := &s.groups[gi]
		if s.gtouched[gi] {
			lam, p = s.groupPosterior(g, lam, p)
		} else {
			lam, p = s.prior(g.mix, 0, lam, p)
		}
		for c := range lam {
			for _, x := range s.mixX[g.mix][c] {
				slope[x.h] -= g.count * p[c] * g.n * x.x
			}
		}
	}
}

// prior is posterior for a flow or group that no chosen hypothesis
// touches: every reply path at rate base, as likely as its share.
func (s *selector) prior(mix int32, base float64, lam, p []float64) ([]float64, []float64) {
	lam, p = lam[:0], p[:0]
	if mix < 0 {
		return append(lam, base), append(p, 1)
	}
	for _, w := range s.mixW[mix] {
		lam, p = append(lam, base), append(p, w)
	}
	return lam, p
}

// posterior returns, for each reply path of lossy flow f, its rate and
// how likely the flow took it, at the current rates.
func (s *selector) posterior(f *sflow, lam, p []float64) ([]float64, []float64) {
	base := s.bg
	for _, x := range s.xs[f.xs:f.xe] {
		base += s.q[x.h] * x.x
	}
	if f.mix < 0 {
		return append(lam[:0], base), append(p[:0], 1)
	}
	lam, p = lam[:0], p[:0]
	best := math.Inf(-1)
	for c, xs := range s.mixX[f.mix] {
		l := base
		for _, x := range xs {
			l += s.q[x.h] * x.x
		}
		t := s.mixLogW[f.mix][c] + f.k*math.Log(f.n*l) - f.n*l
		lam, p = append(lam, l), append(p, t)
		best = max(best, t)
	}
	softmax(p, best)
	return lam, p
}

func (s *selector) groupPosterior(g *cleanGroup, lam, p []float64) ([]float64, []float64) {
	lam, p = lam[:0], p[:0]
	best := math.Inf(-1)
	for c, xs := range s.mixX[g.mix] {
		l := 0.0
		for _, x := range xs {
			l += s.q[x.h] * x.x
		}
		t := s.mixLogW[g.mix][c] - g.n*l
		lam, p = append(lam, l), append(p, t)
		best = max(best, t)
	}
	softmax(p, best)
	return lam, p
}

func softmax(t []float64, best float64) {
	sum := 0.0
	for i := range t {
		t[i] = math.Exp(t[i] - best)
		sum += t[i]
	}
	for i := range t {
		t[i] /= sum
	}
}

// attribute returns the lost probes the fit attributes to hypothesis h
// and the probes that crossed it, each flow's reply paths weighted by
// how likely the flow took them.
func (s *selector) attribute(h int32) (lost, sent float64) {
	sent = s.clean[h]
	var lam, p []float64
	for _, fi := range s.hf[s.hfStart[h]:s.hfStart[h+1]] {
		f := &s.flows[fi]
		lam, p = s.posterior(f, lam, p)
		xa := 0.0
		for _, x := range s.xs[f.xs:f.xe] {
			if x.h == h {
				xa += x.x
			}
		}
		for c := range lam {
			xc := xa
			if f.mix >= 0 {
				for _, x := range s.mixX[f.mix][c] {
					if x.h == h {
						xc += x.x
					}
				}
			}
			sent += f.cnt * p[c] * f.n * xc
			// The background floor takes none: the significance test
			// weighs the loss against Healthy, as the per-link fit's.
			if fit := lam[c] - s.bg; fit > 0 {
				lost += f.cnt * p[c] * f.k * s.q[h] * xc / fit
			}
		}
	}
	for _, gi := range s.hg[s.hgStart[h]:s.hgStart[h+1]] {
		g := &s.groups[gi]
		lam, p = s.groupPosterior(g, lam, p)
		for c := range lam {
			for _, x := range s.mixX[g.mix][c] {
				if x.h == h {
					sent += g.count * p[c] * g.n * x.x
				}
			}
		}
	}
	return lost, sent
}
